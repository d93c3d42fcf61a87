"""The token endpoint's per-address rate limit behind `icelog serve`'s uvicorn.

uvicorn's defaults trust `X-Forwarded-For` from 127.0.0.1 and ::1 and set the ASGI client
address from it. `token_endpoint._client_address` keys the rate limit by that address, so
any client whose connection arrives from loopback (`ssh -L`, `kubectl port-forward`, a TCP
sidecar, a local process) could pick a fresh address per request and never be limited.
`icelog serve` (api/cli.py `uvicorn_options`) believes the header only from the proxies in
ICELOG_FORWARDED_ALLOW_IPS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from icelog.api.auth.provider_calls import RateLimiter
from icelog.api.cli import uvicorn_options
from icelog.api.settings import Settings, SettingsError
from tests.integration.conftest import Authed
from tests.support.server import uvicorn_in_thread

TOKENS = "/catalog/v1/oauth/tokens"
FORM = {"grant_type": "client_credentials", "client_id": "spark-job", "client_secret": "s3cret"}


@contextmanager
def _served(authed: Authed, proxies: tuple[str, ...] = ()) -> Iterator[str]:
    """The authed app behind uvicorn configured as `icelog serve` configures it."""
    authed.idp.add_client("spark-job", "s3cret", {"aud": "icelog"})
    settings = dataclasses.replace(authed.services.settings, forwarded_allow_ips=proxies)
    options = {**uvicorn_options(settings), "log_level": "warning"}
    with uvicorn_in_thread(authed.client.app, lifespan="off", **options) as url:
        yield url


def _spoofed(served: str) -> tuple[list[int], list[int]]:
    with httpx.Client(base_url=served, timeout=30) as client:
        plain = [client.post(TOKENS, data=FORM).status_code for _ in range(3)]
        spoofed = [
            client.post(TOKENS, data=FORM, headers={"X-Forwarded-For": f"10.9.{n}.1"}).status_code
            for n in range(6)
        ]
    return plain, spoofed


@pytest.mark.attack
def test_x_forwarded_for_does_not_reset_the_token_rate_limit(authed: Authed) -> None:
    authed.client.app.state.token_limiter = RateLimiter(60, 2)  # type: ignore[attr-defined]
    with _served(authed) as served:
        plain, spoofed = _spoofed(served)
    assert plain[-1] == 429, plain  # one connection, one address: limited
    assert set(spoofed) == {429}, f"a made-up X-Forwarded-For per request: {spoofed}"


def test_a_trusted_proxy_names_the_client_address(authed: Authed) -> None:
    """With ICELOG_FORWARDED_ALLOW_IPS naming the proxy, each client behind it is limited on
    its own (the header is the proxy's word for who connected)."""
    authed.client.app.state.token_limiter = RateLimiter(60, 2)  # type: ignore[attr-defined]
    with _served(authed, ("127.0.0.1",)) as served:
        plain, spoofed = _spoofed(served)
    assert plain[-1] == 429, plain
    assert 429 not in spoofed, spoofed


def test_forwarded_allow_ips_are_addresses_or_networks() -> None:
    env = {"ICELOG_FORWARDED_ALLOW_IPS": "10.0.0.0/8, ::1,192.168.1.7"}
    assert Settings.from_env(env).forwarded_allow_ips == ("10.0.0.0/8", "::1", "192.168.1.7")
    assert Settings.from_env({}).forwarded_allow_ips == ()
    assert uvicorn_options(Settings.from_env({}))["proxy_headers"] is False
    with pytest.raises(SettingsError, match="FORWARDED_ALLOW_IPS"):
        Settings.from_env({"ICELOG_FORWARDED_ALLOW_IPS": "proxy.internal"})
