"""Files: the model file format and its schema, locks, dumps, and files never written through links."""
