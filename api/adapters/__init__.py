"""Where icelog leans on a web library's internals, one module per library.

Each module names the versions it was written for (`WRITTEN_FOR`) and is the only place
outside tests that imports a private name of its library or subclasses one of its internal
classes; tests/unit/test_library_adapters.py fails when an installed version leaves that
range or changes a behaviour the module relies on.
"""
