"""What went wrong talking to Google, in words safe to show: never a token, a key, an
account's e-mail or a server's free-text message.

When a Google service answered with one of its error documents, the reason is its error
code; any other failure (a refused connection, a timeout, a name that does not resolve, a
web server that is not the service) is one fixed phrase per service, so that an access
check cannot be used to map a network (docs/security.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

NOT_GCS = "no GCS service answered at the endpoint"
NOT_TOKEN_ENDPOINT = "no OAuth token endpoint answered at the key's token_uri"  # noqa: S105
NOT_STS = "no token exchange (STS) service answered at the sts-endpoint"

# GCS's reasons are words ("notFound", "forbidden", "conditionNotMet"); fake-gcs-server's
# are words with spaces ("Not Found"). OAuth error codes are snake_case ("invalid_grant").
_GCS_REASON = re.compile(r"^[A-Za-z][A-Za-z0-9 ]{0,47}$")
_OAUTH_CODE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")


class GoogleAuthFailure(Exception):
    """The catalog's own token, or a downscoped one, could not be had. `reason` is safe to
    show (see the module docstring)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def gcs_reason(status: int, body: bytes) -> str:
    """`<reason> (HTTP <status>)` for a GCS JSON API error document, else NOT_GCS."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return NOT_GCS
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict) or error.get("code") != status:
        return NOT_GCS
    details = error.get("errors")
    reason = None
    if isinstance(details, list) and details and isinstance(details[0], dict):
        reason = details[0].get("reason")
    if isinstance(reason, str) and _GCS_REASON.fullmatch(reason):
        return f"{reason} (HTTP {status})"
    return f"HTTP {status}"


def oauth_code(document: Any) -> str | None:
    """The `error` code of an OAuth error answer (a dict, or its JSON text), if it is one."""
    if isinstance(document, bytes | str):
        try:
            document = json.loads(document)
        except ValueError:
            return None
    code = document.get("error") if isinstance(document, dict) else None
    return code if isinstance(code, str) and _OAUTH_CODE.fullmatch(code) else None
