module fleetgen.test/git-https

go 1.26
