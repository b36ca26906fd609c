"""Starting a fleet of one's own from a copy of this repository (`fleetgen init`)."""
