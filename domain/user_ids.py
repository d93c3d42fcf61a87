"""User ids of the identity providers' users (ADR 0019). Pure: building, parsing, checking.

One id names one person of one provider, as Lakekeeper's `{idp_id}~{subject}`:

- `oidc~<subject>`: the *default* provider's users, the one configured without a key (the
  only one, when only one is configured); ids written before ADR 0019 keep naming the same
  users.
- `<key>~<subject>`: the users of the provider configured as `<key>=<uri>`; `<key>` is 1 to
  32 lower-case letters, digits, `-` or `_`, starting with a letter or digit, and neither
  `oidc` (the default provider's) nor `kubernetes` (Lakekeeper's service accounts).

The provider part ends at the first `~` and holds no `~` itself, so a subject of one
provider can never spell a user of another (`b~x` is provider `b`'s `x`; the default
provider's subject `b~x` is `oidc~b~x`).

Which claim is the subject is the provider's business (`subject_claim_order`): `oid`
before `sub` only for Entra ID (Microsoft's object id is stable across applications, its
`sub` is pairwise per application); everywhere else `sub`, since `oid` is a claim like any
other there and may even be set by users themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_KEY = "oidc"
DEFAULT_PREFIX = DEFAULT_KEY + "~"
RESERVED_KEYS = frozenset({DEFAULT_KEY, "kubernetes"})
MAX_KEY_CHARS = 32
_KEY = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_ID_PREFIX = re.compile(r"([a-z0-9][a-z0-9_-]{0,31})~")

# Entra ID's (Azure AD's) login hosts: the public cloud and the national clouds.
ENTRA_HOSTS = frozenset(
    {
        "login.microsoftonline.com",
        "login.microsoftonline.us",
        "login.chinacloudapi.cn",
        "login.partner.microsoftonline.cn",
    }
)


@dataclass(frozen=True)
class UserId:
    provider_key: str | None  # None: the default provider
    subject: str

    def __str__(self) -> str:
        return user_id(self.provider_key, self.subject)


def valid_key(key: str) -> bool:
    """Whether `key` may name a configured provider."""
    return _KEY.fullmatch(key) is not None and key not in RESERVED_KEYS


def user_id(provider_key: str | None, subject: str) -> str:
    """The id of `subject` at the provider with `provider_key` (None: the default one)."""
    if not subject:
        raise ValueError("a user id needs a subject")
    if provider_key is None:
        return DEFAULT_PREFIX + subject
    if not valid_key(provider_key):
        raise ValueError(f"invalid provider key {provider_key!r}")
    return f"{provider_key}~{subject}"


def parse_user_id(text: str) -> UserId:
    """The provider key (None: the default provider) and subject of a user id; ValueError
    when it is none (`anonymous`, `system`, `kubernetes~…` are none)."""
    found = _ID_PREFIX.match(text)
    if found is None or found.end() == len(text) or found.group(1) == "kubernetes":
        raise ValueError(f"not a user id: {text!r}")
    key = found.group(1)
    return UserId(None if key == DEFAULT_KEY else key, text[found.end() :])


def is_user_id(text: str) -> bool:
    try:
        parse_user_id(text)
    except ValueError:
        return False
    return True


def is_entra(provider_uri: str) -> bool:
    """Whether the provider is Entra ID (by its issuer URL's host)."""
    host = urlsplit(provider_uri).hostname or ""
    return host.lower() in ENTRA_HOSTS


def subject_claim_order(provider_uri: str) -> tuple[str, ...]:
    """The claims tried, in order, for the subject when none are configured."""
    return ("oid", "sub") if is_entra(provider_uri) else ("sub",)


def parse_provider_entry(entry: str) -> tuple[str | None, str]:
    """`<key>=<uri>` or a bare `<uri>` (the default provider) from the provider setting."""
    key, sep, rest = entry.partition("=")
    if sep and re.fullmatch(r"[A-Za-z0-9_-]+", key):
        if not valid_key(key):
            raise ValueError(
                f"provider key {key!r}: 1-{MAX_KEY_CHARS} lower-case letters, digits, '-' or "
                "'_', starting with a letter or digit, not 'oidc' or 'kubernetes'"
            )
        return key, rest.strip()
    return None, entry
