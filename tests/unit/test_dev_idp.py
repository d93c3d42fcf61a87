"""`icelog dev-idp` in process: its users and their credentials, the login page the console
sends browsers to, a kept signing key, and what it refuses (a non-loopback address without
`--allow-remote`, a busy port — before printing anything — and bad names)."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import pytest

from icelog.api.cli import main
from icelog.api.dev_idp.command import UsageError, load_key, parse_users
from icelog.api.dev_idp.provider import key_id
from icelog.api.dev_idp.server import DevIdentityProvider

CALLBACK = "http://127.0.0.1:8181/ui/callback"


@pytest.fixture
def idp() -> Iterator[DevIdentityProvider]:
    with DevIdentityProvider(users=["alice", "bob"]) as provider:
        for name, secret in parse_users(["alice", "bob:s3cret"]).items():
            provider.add_user(name, secret)
        yield provider


def claims(idp: DevIdentityProvider, token: str) -> dict[str, object]:
    public = idp.private_key().public_key()
    found: dict[str, object] = jwt.decode(
        token, public, algorithms=["RS256"], audience="icelog", issuer=idp.issuer
    )
    return found


def authorization(state: str = "st4te") -> tuple[dict[str, str], str]:
    """The console's authorization request (code + PKCE S256) and its verifier."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = {
        "response_type": "code", "client_id": "icelog", "redirect_uri": CALLBACK,
        "scope": "openid profile email", "state": state,
        "code_challenge": challenge.rstrip(b"=").decode(), "code_challenge_method": "S256",
    }  # fmt: skip
    return query, verifier


def test_users_and_their_client_credentials() -> None:
    assert parse_users(["alice", "bob:s3cret"]) == {"alice": "alice-secret", "bob": "s3cret"}
    for bad in (["bob", "bob"], ["bob:"], ["bad name"], ["-x"], ["ali@ce"], [""]):
        with pytest.raises(UsageError):
            parse_users(bad)


def test_a_users_client_credentials_give_their_own_token(idp: DevIdentityProvider) -> None:
    answer = httpx.post(
        idp.token_endpoint, data={"grant_type": "client_credentials"}, auth=("bob", "s3cret")
    )
    assert answer.status_code == 200, answer.text
    token = claims(idp, answer.json()["access_token"])
    assert token["sub"] == "bob" and token["name"] == "bob" and token["azp"] == "bob"
    wrong = httpx.post(
        idp.token_endpoint, data={"grant_type": "client_credentials"}, auth=("bob", "bob-secret")
    )
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"


def test_discovery_names_the_login_page(idp: DevIdentityProvider) -> None:
    found = httpx.get(f"{idp.uri}/.well-known/openid-configuration").json()
    assert found["issuer"] == idp.uri
    assert found["authorization_endpoint"] == f"{idp.uri}/authorize"
    assert found["token_endpoint"] == f"{idp.uri}/token"
    assert httpx.get(found["jwks_uri"]).json()["keys"][0]["kid"] == idp.signing_kid


def test_an_issuer_given_is_the_uri_it_announces() -> None:
    with DevIdentityProvider(issuer="http://idp.dev.example:8180/") as provider:
        found = httpx.get(f"http://127.0.0.1:{provider.port}/.well-known/openid-configuration")
        assert found.json()["issuer"] == "http://idp.dev.example:8180"
        assert found.json()["token_endpoint"] == "http://idp.dev.example:8180/token"


def _sign_in(idp: DevIdentityProvider, field: str, name: str) -> dict[str, object]:
    """The login page's form, sent as a browser would: the claims of the token the code
    is then exchanged for (the console's callback)."""
    query, verifier = authorization()
    page = httpx.get(f"{idp.uri}/authorize", params=query)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'value="st4te"' in page.text and 'data-user="alice"' in page.text
    posted = httpx.post(f"{idp.uri}/authorize", data={**query, field: name})
    assert posted.status_code == 303, posted.text
    back = urlsplit(posted.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == CALLBACK
    returned = parse_qs(back.query)
    assert returned["state"] == ["st4te"]
    exchange = {
        "grant_type": "authorization_code", "code": returned["code"][0],
        "redirect_uri": CALLBACK, "client_id": "icelog", "code_verifier": verifier,
    }  # fmt: skip
    answer = httpx.post(idp.token_endpoint, data=exchange)
    assert answer.status_code == 200, answer.text
    again = httpx.post(idp.token_endpoint, data=exchange)
    assert again.status_code == 400, "a code is used once"
    return claims(idp, answer.json()["access_token"])


def test_the_login_page_signs_in_a_named_user(idp: DevIdentityProvider) -> None:
    token = _sign_in(idp, "user", "bob")
    assert token["sub"] == "bob" and token["email"] == "bob@example.com"


def test_the_login_page_signs_in_any_name_typed(idp: DevIdentityProvider) -> None:
    assert _sign_in(idp, "name", "dave.k")["sub"] == "dave.k"


def test_a_name_that_is_no_user_id_is_asked_again(idp: DevIdentityProvider) -> None:
    query, _ = authorization()
    posted = httpx.post(f"{idp.uri}/authorize", data={**query, "name": "bob smith"})
    assert posted.status_code == 400
    assert "Type a name" in posted.text and 'value="st4te"' in posted.text


@pytest.mark.attack
def test_the_login_page_escapes_what_the_request_carries(idp: DevIdentityProvider) -> None:
    query, _ = authorization(state='"><script>alert(1)</script>')
    page = httpx.get(f"{idp.uri}/authorize", params=query)
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-frame-options"] == "DENY"


@pytest.mark.attack
def test_the_login_page_sends_codes_to_web_addresses_only(idp: DevIdentityProvider) -> None:
    query, _ = authorization()
    for target in ("javascript:alert(1)", "data:text/html,x", ""):
        answer = httpx.get(f"{idp.uri}/authorize", params={**query, "redirect_uri": target})
        assert answer.status_code == 400
        posted = httpx.post(
            f"{idp.uri}/authorize", data={**query, "redirect_uri": target, "user": "bob"}
        )
        assert posted.status_code == 400 and "location" not in posted.headers


@pytest.mark.attack
def test_a_code_is_bound_to_its_pkce_verifier(idp: DevIdentityProvider) -> None:
    query, _ = authorization()
    posted = httpx.post(f"{idp.uri}/authorize", data={**query, "user": "alice"})
    code = parse_qs(urlsplit(posted.headers["location"]).query)["code"][0]
    stolen = httpx.post(
        idp.token_endpoint,
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK,
              "client_id": "icelog", "code_verifier": secrets.token_urlsafe(48)},
    )  # fmt: skip
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"


def test_a_kept_key_outlives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "not-yet" / "dev-idp.pem"
    first = load_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = load_key(path)
    assert key_id(again) == key_id(first)
    with DevIdentityProvider(keys=[first]) as before:
        token = before.issue("bob")
    with DevIdentityProvider(keys=[again]) as after:
        assert after.signing_kid == key_id(first)
        jwt.decode(token, after.private_key().public_key(), algorithms=["RS256"],
                   audience="icelog")  # fmt: skip
    path.write_text("not a key")
    with pytest.raises(UsageError, match="not a readable PEM"):
        load_key(path)


def test_the_command_prints_nothing_until_it_listens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dev-idp", "--port", str(port)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"cannot listen on 127.0.0.1:{port}" in err


@pytest.mark.attack
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])  # noqa: S104
def test_it_refuses_other_machines_unless_told(
    capsys: pytest.CaptureFixture[str], host: str
) -> None:
    assert main(["dev-idp", "--host", host, "--port", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"refusing to listen on {host}" in err and "--allow-remote" in err


def test_bad_arguments_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dev-idp", "--user", "bad name", "--port", "0"]) == 2
    assert main(["dev-idp", "--token-lifetime", "0", "--port", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "a name is letters" in err and "--token-lifetime" in err


def _raw(idp: DevIdentityProvider, request: bytes) -> bytes:
    """What the provider answers to `request` sent as is (the client then stops sending)."""
    with socket.create_connection(("127.0.0.1", idp.port)) as conn:
        conn.sendall(request)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(30)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_it_listens_on_the_ipv6_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    for host in ("::1", "[::1]"):
        with DevIdentityProvider(host, users=["alice"]) as provider:
            assert provider.uri == f"http://[::1]:{provider.port}"
            found = httpx.get(f"{provider.uri}/.well-known/openid-configuration")
            assert found.json()["issuer"] == provider.uri


def test_a_port_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for port in ("70000", "-1"):
        assert main(["dev-idp", "--port", port]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("--port must be 0 to 65535") == 2


@pytest.mark.attack
def test_a_secret_or_verifier_beyond_ascii_is_refused_with_an_answer(
    idp: DevIdentityProvider,
) -> None:
    wrong = httpx.post(
        idp.token_endpoint,
        data={"grant_type": "client_credentials", "client_id": "bob", "client_secret": "s3cré"},
    )
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    idp.add_user("carol", "sécret")
    right = httpx.post(
        idp.token_endpoint, data={"grant_type": "client_credentials"}, auth=("carol", "sécret")
    )
    assert right.status_code == 200 and claims(idp, right.json()["access_token"])["sub"] == "carol"
    query, verifier = authorization()
    posted = httpx.post(
        f"{idp.uri}/authorize", data={**query, "code_challenge": "é", "user": "bob"}
    )
    code = parse_qs(urlsplit(posted.headers["location"]).query)["code"][0]
    exchanged = httpx.post(
        idp.token_endpoint,
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK,
              "client_id": "icelog", "code_verifier": verifier},
    )  # fmt: skip
    assert exchanged.status_code == 400 and exchanged.json()["error"] == "invalid_grant"


@pytest.mark.attack
@pytest.mark.parametrize("length", ["-1", "abc"])
def test_a_bad_content_length_cannot_pass_the_size_limit(
    idp: DevIdentityProvider, length: str
) -> None:
    # A valid form padded past the 64 KiB limit (and past what socket buffers hold, so the
    # refusal must be read while the client still sends): read to the end, it would earn
    # a token.
    body = b"grant_type=client_credentials&client_id=bob&client_secret=s3cret&pad=" + b"a" * 600000
    answer = _raw(
        idp,
        f"POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode() + body,
    )
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"access_token" not in answer


@pytest.mark.attack
@pytest.mark.parametrize(
    "target", [CALLBACK + "\r\nSet-Cookie: session=attacker", CALLBACK + "\n", CALLBACK + "/€"]
)
def test_a_redirect_uri_cannot_add_headers_or_break_the_answer(
    idp: DevIdentityProvider, target: str
) -> None:
    query, _ = authorization()
    answer = _raw(
        idp,
        b"POST /authorize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s"
        % _form({**query, "redirect_uri": target, "user": "bob"}),
    )
    head = answer.split(b"\r\n\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 400 "), head
    assert b"Set-Cookie" not in head and b"Location" not in head
    shown = httpx.get(f"{idp.uri}/authorize", params={**query, "redirect_uri": target})
    assert shown.status_code == 400


def _form(fields: dict[str, str]) -> tuple[int, bytes]:
    body = urlencode(fields).encode()
    return len(body), body
