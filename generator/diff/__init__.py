"""`fleetgen diff`: what a change to teams/ and clusters/ does to every cluster, for reviewers."""
