"""The listening sockets of `icelog serve`, bound before anything is announced.

uvicorn binds its port only after the application's start-up, so a busy port showed up as
"icelog serving ..." and the console's address, then a traceback-free but late "address
already in use" from uvicorn. `icelog serve` binds (and listens) here first: a port it
cannot have is one line and a non-zero exit, and the banner is printed only once the
sockets are ours. The sockets are handed to uvicorn (`Server.run(sockets=...)`), and with
`--workers N` inherited across the exec into api/supervise.py, which shares them with the
worker processes, as uvicorn's own supervisor does with the socket it binds.

The sockets are made as asyncio's `create_server(host, port)` makes them (one per address
the host resolves to, SO_REUSEADDR, IPv6 sockets IPv6-only), so `--host localhost` or
`--host ''` listen where they did before.
"""

from __future__ import annotations

import ipaddress
import socket

BACKLOG = 2048  # uvicorn's default


class CannotListen(Exception):
    """The address cannot be had: `reason` as the system says it (lower case)."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(f"cannot listen on {address_text(host, port)}: {reason}")


def is_loopback(host: str) -> bool:
    """Whether `host` (a name, an address, an IPv6 one in brackets) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address_text(host: str, port: int) -> str:
    """`host:port`, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound, listening, inheritable sockets for every address `host` resolves to."""
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise CannotListen(host, port, _lower(exc.strerror or str(exc))) from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in found:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.set_inheritable(True)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise CannotListen(host, port, _lower(exc.strerror or str(exc))) from None
    return sockets


def bound_port(sockets: list[socket.socket], asked: int) -> int:
    """The port listened on (the system's choice for port 0)."""
    return int(sockets[0].getsockname()[1]) if sockets else asked


def _lower(reason: str) -> str:
    return reason[:1].lower() + reason[1:]
