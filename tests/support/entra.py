"""A stand-in for Microsoft Entra ID's token service, over HTTPS on a free loopback port:
what azure-identity's ClientSecretCredential (through MSAL) asks of an authority host.

- `GET /<tenant>/v2.0/.well-known/openid-configuration`: the tenant's endpoints;
- `POST /<tenant>/oauth2/v2.0/token` with `grant_type=client_credentials`: an access token
  for the client whose secret matches, else `invalid_client` (HTTP 401), as Entra answers.

The tokens are JWTs with Entra's claims (issuer `https://sts.windows.net/<tenant>/`, audience
`https://storage.azure.com`, `oid`, `tid`); Azurite's OAuth mode checks those claims and not
the signature, so they are signed with a throw-away HMAC key. Every request is recorded.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt

from tests.support.azurite import Tls


@dataclass
class Seen:
    method: str
    path: str
    form: dict[str, str] = field(default_factory=dict)


class EntraStandIn:
    """`with EntraStandIn(tls, {"client-id": "secret"}) as entra: entra.url`"""

    def __init__(self, tls: Tls, clients: dict[str, str]) -> None:
        self.clients = dict(clients)
        self.seen: list[Seen] = []
        self.object_id = str(uuid.uuid4())
        authority = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                authority.seen.append(Seen("GET", path))
                parts = path.strip("/").split("/")
                if len(parts) == 4 and parts[1:] == ["v2.0", ".well-known", "openid-configuration"]:
                    self._send(200, authority.discovery(parts[0]))
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                authority.seen.append(Seen("POST", path, form))
                parts = path.strip("/").split("/")
                if len(parts) != 4 or parts[1:] != ["oauth2", "v2.0", "token"]:
                    self._send(404, {"error": "not_found"})
                    return
                client = form.get("client_id", "")
                if authority.clients.get(client) != form.get("client_secret"):
                    self._send(
                        401,
                        {
                            "error": "invalid_client",
                            "error_description": "AADSTS7000215: Invalid client secret.",
                        },
                    )
                    return
                self._send(200, authority.token(parts[0], client))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls.cert, tls.key)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def discovery(self, tenant: str) -> dict[str, Any]:
        base = f"{self.url}/{tenant}"
        return {
            "issuer": f"{base}/v2.0",
            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
            "jwks_uri": f"{base}/discovery/v2.0/keys",
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        }

    def token(self, tenant: str, client: str) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "aud": "https://storage.azure.com",
            "iss": f"https://sts.windows.net/{tenant}/",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + 3600,
            "appid": client,
            "oid": self.object_id,
            "tid": tenant,
            "sub": self.object_id,
            "ver": "1.0",
        }
        token = jwt.encode(claims, "stand-in-signing-key-of-32-bytes!", algorithm="HS256")
        return {"token_type": "Bearer", "expires_in": 3600, "access_token": token}

    def __enter__(self) -> EntraStandIn:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
