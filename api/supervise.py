"""The parent process of `icelog serve --workers N`, started in place of the CLI.

`icelog serve` prepares the schema and the embedded defaults with the whole catalog
imported, then replaces itself (same pid, so signals still reach it) with this module:
uvicorn's supervisor only starts, watches and stops the workers, and a parent that kept
the catalog's imports held ~70 MB for nothing (~26 MB this way).

    python -m icelog.api.supervise HOST PORT WORKERS LOG_LEVEL LOG_FORMAT FDS

FDS: the listening sockets `icelog serve` bound before it announced itself (api/listen.py),
comma-separated descriptors inherited across the exec; the workers share them.
"""

from __future__ import annotations

import os
import socket
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

from icelog.api.logs import configure_logging, uvicorn_log_options


def main(argv: list[str]) -> int:
    host, port, workers, log_level, log_format, fds = argv
    configure_logging(log_format, log_level)
    # Each worker sizes its pools to its share of ICELOG_PG_MAX_CONNECTIONS (the workers
    # inherit the environment).
    os.environ["ICELOG_SERVE_WORKERS"] = workers
    config = uvicorn.Config(
        "icelog.api.app:create_app_from_env",
        factory=True,
        host=host,
        port=int(port),
        workers=int(workers),
        log_level=log_level,
        http="httptools",
        # Each worker finishes its requests in flight, as a single-process server does.
        timeout_graceful_shutdown=10,
        **uvicorn_log_options(),
    )
    sockets = [socket.socket(fileno=int(fd)) for fd in fds.split(",")]
    Multiprocess(config, sockets=sockets).run()  # handles SIGINT and SIGTERM itself
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
