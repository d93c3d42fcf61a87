"""icelog: an event-sourced Apache Iceberg REST catalog.

The repository keeps its layers as top-level folders (`api/`, `commands/`, `domain/`,
`projections/`, `publishers/`); this package names them `icelog.api`, `icelog.commands`, ...
(the folders here are links to them), and that is how they are installed and imported.
"""
