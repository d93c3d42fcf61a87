"""An independent check of Blob service SAS tokens: the signature recomputed from the
token's own fields after the string-to-sign layouts Microsoft documents ("Create a service
SAS", "Create a user delegation SAS"), without azure-storage-blob's signer.

It is checked itself against Azurite, which validates service SAS tokens of the current
layout (tests/integration/test_storage_adls.py), so that a vended token it agrees with is
one the service computes the same signature for.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import parse_qs, urlencode


def fields(token: str) -> dict[str, str]:
    """A SAS token's query fields, decoded."""
    return {key: values[0] for key, values in parse_qs(token, keep_blank_values=True).items()}


def canonical_resource(account: str, container: str, name: str = "") -> str:
    return f"/blob/{account}/{container}" + (f"/{name}" if name else "")


def string_to_sign(f: dict[str, str], resource: str, *, delegation: bool) -> str:
    """The documented layout for service versions 2020-12-06 and later. A user delegation
    SAS signs the key's fields in the identifier's place (from 2025-07-05 with the delegated
    user's tenant and object ids), and in the versions after 2025-11-05 (the newest Azurite
    3.35 knows) also the signed request headers and query parameters, empty here."""
    lines = [f.get("sp", ""), f.get("st", ""), f.get("se", ""), resource]
    if delegation:
        lines += [f.get(k, "") for k in ("skoid", "sktid", "skt", "ske", "sks", "skv")]
        lines += [f.get(k, "") for k in ("saoid", "suoid", "scid")]
        if f.get("sv", "") >= "2025-07-05":
            lines += [f.get("skdutid", ""), f.get("sduoid", "")]
    else:
        lines.append(f.get("si", ""))
    lines += [f.get(k, "") for k in ("sip", "spr", "sv", "sr", "snapshot", "ses")]
    if delegation and f.get("sv", "") > "2025-11-05":
        lines += [f.get("srh", ""), f.get("srq", "")]
    lines += [f.get(k, "") for k in ("rscc", "rscd", "rsce", "rscl", "rsct")]
    return "\n".join(lines)


def signature(f: dict[str, str], resource: str, key_b64: str, *, delegation: bool) -> str:
    digest = hmac.new(
        base64.b64decode(key_b64),
        string_to_sign(f, resource, delegation=delegation).encode(),
        hashlib.sha256,
    ).digest()
    return base64.b64encode(digest).decode()


def service_sas(
    account: str, key_b64: str, container: str, name: str, *, resource: str, **values: str
) -> str:
    """A service SAS signed by this module (for checking this module against Azurite)."""
    f = {"sv": "2025-11-05", "sr": resource, **values}
    f["sig"] = signature(f, canonical_resource(account, container, name), key_b64, delegation=False)
    return urlencode(f)
