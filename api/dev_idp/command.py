"""`icelog dev-idp`: start a local OpenID provider for development and say how to use it.

    icelog dev-idp                          # users alice and bob, on http://127.0.0.1:8180
    icelog dev-idp --user carol --user etl:s3cret

Each `--user NAME[:SECRET]` is a person who can sign in to the console (its login page
offers them, and takes any other name typed in) and has client credentials
`NAME:SECRET` (default secret `NAME-secret`) for engines; both give tokens whose subject
is NAME, icelog's user `oidc~NAME`. Once the port is bound, it prints the `ICELOG_*`
variables for `icelog serve` and the credentials; then it serves until stopped.

Anyone who reaches it can sign in as anyone, so it listens on loopback only unless
`--allow-remote` is given too. Its signing key is new at each start (tokens end with the
process) unless `--key-file` keeps one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from icelog.api.dev_idp.provider import USER_NAME, new_rsa_key
from icelog.api.dev_idp.server import DevIdentityProvider
from icelog.api.listen import is_loopback

DEFAULT_PORT = 8180
DEFAULT_USERS = ("alice", "bob")


class UsageError(ValueError):
    """A bad argument: said on stderr, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "A local OpenID provider for trying icelog's authentication (docs/auth.md, "
        '"Try auth locally"): users you name, a login page for the console, client '
        "credentials for engines. Development only: anyone who reaches it can sign in as anyone."
    )
    parser.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME[:SECRET]",
        help="a user with client credentials NAME:SECRET (default secret NAME-secret); "
        f"repeat for more (default: {' and '.join(DEFAULT_USERS)})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="listen port (default 8180)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on a non-loopback --host: whoever reaches it can sign in as anyone",
    )
    parser.add_argument(
        "--issuer",
        default=None,
        help="its URL as icelog and browsers reach it (default: http://HOST:PORT)",
    )
    parser.add_argument("--audience", default="icelog", help="the tokens' aud (default icelog)")
    parser.add_argument(
        "--token-lifetime",
        type=int,
        default=3600,
        metavar="SECONDS",
        help="how long its tokens live (default 3600)",
    )
    parser.add_argument(
        "--key-file",
        type=Path,
        default=None,
        help="keep the signing key in this PEM file (created if missing), so tokens outlive a "
        "restart; default: a new key at each start",
    )


def run(args: argparse.Namespace) -> int:
    try:
        users = parse_users(args.user or list(DEFAULT_USERS))
        refuse_remote(args.host, allow=args.allow_remote)
        key = load_key(args.key_file) if args.key_file is not None else new_rsa_key()
    except UsageError as exc:
        print(f"icelog dev-idp: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print("icelog dev-idp: --port must be 0 to 65535", file=sys.stderr)
        return 2
    if args.token_lifetime < 1:
        print("icelog dev-idp: --token-lifetime must be at least 1", file=sys.stderr)
        return 2
    try:
        provider = DevIdentityProvider(
            args.host,
            args.port,
            issuer=args.issuer,
            users=list(users),
            audience=args.audience,
            token_seconds=args.token_lifetime,
            login_seconds=args.token_lifetime,
            keys=[key],
        )
    except OSError as exc:
        print(
            f"icelog dev-idp: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    for name, secret in users.items():
        provider.add_user(name, secret)
    if not is_loopback(args.host):
        print(remote_warning(args.host), file=sys.stderr, flush=True)
    print(banner(provider, users, args.key_file), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with provider:
        stop.wait()
    return 0


def parse_users(entries: list[str]) -> dict[str, str]:
    """`NAME[:SECRET]` entries → name → secret."""
    users: dict[str, str] = {}
    for entry in entries:
        name, given, secret = entry.partition(":")
        if not USER_NAME.fullmatch(name):
            raise UsageError(
                f"--user {entry!r}: a name is letters, digits, '.', '_' or '-' (at most 64)"
            )
        if given and not secret:
            raise UsageError(f"--user {entry!r}: the secret after ':' is empty")
        if name in users:
            raise UsageError(f"--user {name!r} is given twice")
        users[name] = secret or f"{name}-secret"
    return users


def refuse_remote(host: str, *, allow: bool) -> None:
    """A provider that signs anyone in as anyone must not be reachable from other machines
    by accident: a token it issues is a server admin's on every icelog that trusts it."""
    if not is_loopback(host) and not allow:
        raise UsageError(
            f"refusing to listen on {host}: anyone who reaches this provider can sign in as "
            "anyone (the server admin included). It is for development on this machine; "
            "add --allow-remote if other machines must reach it anyway"
        )


def remote_warning(host: str) -> str:
    return (
        f"WARNING: icelog dev-idp listens on {host}: anyone who reaches it can sign in as "
        "anyone, with no password. For development only; never point a real deployment at it."
    )


def load_key(path: Path) -> rsa.RSAPrivateKey:
    """The signing key kept in `path`, made (readable by its owner only) when missing."""
    try:
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        key = new_rsa_key()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise UsageError(f"--key-file {path}: {exc.strerror or exc}") from None
        with os.fdopen(descriptor, "wb") as out:
            out.write(pem)
        return key
    except (OSError, ValueError) as exc:
        raise UsageError(f"--key-file {path}: not a readable PEM private key ({exc})") from None
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise UsageError(f"--key-file {path}: not an RSA key")
    return loaded


def banner(provider: DevIdentityProvider, users: dict[str, str], key_file: Path | None) -> str:
    """What to export for `icelog serve`, who can sign in, and their client credentials."""
    width = max(len(name) for name in users)
    credentials = "\n".join(
        f"  {name:<{width}}  user oidc~{name:<{width}}  credential {name}:{secret}"
        for name, secret in users.items()
    )
    keys = (
        f"kept in {key_file} (tokens outlive a restart)"
        if key_file is not None
        else "new at each start: tokens end with this process (--key-file keeps one)"
    )
    return f"""icelog dev-idp: an OpenID provider for development at {provider.uri}
Anyone who reaches it can sign in as anyone. Never point a real deployment at it.

Start icelog with it (in another shell):

export ICELOG_OPENID_PROVIDER_URI={provider.uri}
export ICELOG_OPENID_AUDIENCE={provider.default_audience}
export ICELOG_CONSOLE_INSECURE_COOKIES=true
icelog serve

Users (the console's login page offers them and takes any other name):
{credentials}

Engines send a credential as "<id>:<secret>" with nothing but the catalog URI (icelog
passes it to {provider.token_endpoint}), or set oauth2-server-uri to that endpoint.
Signing key: {keys}. Stop with Ctrl-C."""
