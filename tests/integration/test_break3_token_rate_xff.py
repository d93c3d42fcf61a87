"""Attack: the token endpoint's per-address rate limit behind `icelog serve`'s uvicorn.

`icelog serve` runs `uvicorn.run(app, ...)` without `proxy_headers` / `forwarded_allow_ips`:
uvicorn's defaults then trust `X-Forwarded-For` from 127.0.0.1 and ::1 and set the ASGI
client address from it. `token_endpoint._client_address` keys the rate limit by that
address. Any client whose connection arrives from loopback — `ssh -L`, `kubectl
port-forward`, a TCP sidecar, a local process, a same-host proxy that passes the header
through — picks a fresh address per request and is never limited (docs/security.md: "Each
client address is limited ... behind a proxy all clients share one address").
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from icelog.api.auth.provider_calls import RateLimiter
from icelog.api.batched_writes import BatchedHttpProtocol
from tests.integration.conftest import Authed

TOKENS = "/catalog/v1/oauth/tokens"
FORM = {"grant_type": "client_credentials", "client_id": "spark-job", "client_secret": "s3cret"}


@pytest.fixture
def served(authed: Authed) -> Iterator[str]:
    """The authed app behind uvicorn configured as `icelog serve` configures it (api/cli.py)."""
    authed.idp.add_client("spark-job", "s3cret", {"aud": "icelog"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        authed.client.app, host="127.0.0.1", port=port, log_level="warning",
        http=BatchedHttpProtocol, timeout_graceful_shutdown=10, lifespan="off",
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.mark.attack
def test_attack_x_forwarded_for_does_not_reset_the_token_rate_limit(
    authed: Authed, served: str
) -> None:
    authed.client.app.state.token_limiter = RateLimiter(60, 2)  # type: ignore[attr-defined]
    with httpx.Client(base_url=served, timeout=30) as client:
        plain = [client.post(TOKENS, data=FORM).status_code for _ in range(3)]
        assert plain[-1] == 429, plain  # one connection, one address: limited
        spoofed = [
            client.post(TOKENS, data=FORM, headers={"X-Forwarded-For": f"10.9.{n}.1"}).status_code
            for n in range(6)
        ]
    assert 429 in spoofed, f"a made-up X-Forwarded-For per request is never limited: {spoofed}"
