"""The `file` storage kind: warehouses in a directory of the server's own file system."""
