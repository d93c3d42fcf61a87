"""Where the read side leans on a library's internals, one module per library.

Each module names the versions it was written for (`WRITTEN_FOR`) and is the only place
outside tests that changes its library's objects; tests/unit/test_library_adapters.py
fails when an installed version leaves that range or changes a behaviour it relies on.
"""
