"""Helpers shared by the end-to-end tests: databases, a catalog server process, Spark, DuckDB."""
