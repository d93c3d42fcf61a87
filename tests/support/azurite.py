"""Azurite (Microsoft's Azure Storage emulator, Blob service) for tests.

`scripts/test` installs it into `.cache/azurite` and starts one on 127.0.0.1:10000; a test
session that finds nothing there starts its own on a free port. `azurite_oauth` starts one
more that speaks HTTPS with OAuth (Azurite's `--oauth basic`: a bearer token's issuer,
audience and lifetime are checked, its signature is not), which the service-principal path
needs for user delegation keys.

Azurite serves the Blob API only (no DFS endpoint, no hierarchical namespace), at
`<scheme>://127.0.0.1:<port>/<account>`, with the well-known development account below.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from azure.storage.blob import BlobServiceClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.server import REPO_ROOT, free_port

ACCOUNT = "devstoreaccount1"
# Azurite's published development key (not a secret: every Azurite has it).
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURITE_BIN = REPO_ROOT / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
DEFAULT_URL = "http://127.0.0.1:10000"


@dataclass(frozen=True)
class Azurite:
    """A running Azurite: `endpoint` is the development account's Blob endpoint."""

    url: str

    @property
    def endpoint(self) -> str:
        return f"{self.url}/{ACCOUNT}"

    def admin(self) -> BlobServiceClient:
        """A client with the account key, for set-up and for looking behind the catalog."""
        return BlobServiceClient(
            self.endpoint, credential={"account_name": ACCOUNT, "account_key": ACCOUNT_KEY}
        )

    def new_filesystem(self) -> str:
        """A new, empty filesystem (container) of its own for one test."""
        name = f"t{uuid.uuid4().hex[:20]}"
        self.admin().create_container(name)
        return name


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def _started(args: list[str], log: Path, port: int) -> Iterator[None]:
    if not AZURITE_BIN.exists():
        raise RuntimeError(
            f"Azurite is not installed at {AZURITE_BIN}: scripts/test installs it "
            "(npm install --prefix .cache/azurite azurite@3.35.0)"
        )
    with log.open("ab") as out:
        process = subprocess.Popen([str(AZURITE_BIN), *args], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _answers("127.0.0.1", port):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"Azurite did not start (see {log})")
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


def _base_args(workdir: Path, port: int) -> list[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    return [
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        str(workdir),
        "--skipApiVersionCheck",
        "--loose",
        "--silent",
    ]


@contextmanager
def azurite(workdir: Path) -> Iterator[Azurite]:
    """The Azurite at ICELOG_TEST_AZURITE_URL (default 127.0.0.1:10000, where scripts/test
    starts one), or a new one on a free port when nothing answers there."""
    url = os.environ.get("ICELOG_TEST_AZURITE_URL", DEFAULT_URL).rstrip("/")
    host_port = url.split("://", 1)[1]
    host, _, port = host_port.partition(":")
    if _answers(host, int(port or 80)):
        yield Azurite(url)
        return
    port_number = free_port()
    with _started(_base_args(workdir, port_number), workdir / "azurite.log", port_number):
        yield Azurite(f"http://127.0.0.1:{port_number}")


@dataclass(frozen=True)
class Tls:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""

    cert: Path
    key: Path


def self_signed(directory: Path) -> Tls:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    tls = Tls(directory / "cert.pem", directory / "key.pem")
    tls.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tls.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return tls


@contextmanager
def azurite_oauth(workdir: Path, tls: Tls) -> Iterator[Azurite]:
    """A new Azurite on a free port over HTTPS (`tls`) that takes OAuth bearer tokens."""
    port = free_port()
    args = [*_base_args(workdir, port), "--oauth", "basic", "--cert", str(tls.cert)]
    args += ["--key", str(tls.key)]
    with _started(args, workdir / "azurite-oauth.log", port):
        yield Azurite(f"https://127.0.0.1:{port}")
