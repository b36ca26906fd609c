module fleetgen.test/dcgm-csv

go 1.26
