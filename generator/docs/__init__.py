"""Reference text generated from the code (config keys, alerts, JSON schemas): the top of the import line,
so it may read every stage it documents."""
