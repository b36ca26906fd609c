"""Reference pages generated from the code (config keys, alerts, the command line, the diff JSON, the Python
API): the top of the import line, so it may read every stage it documents."""
