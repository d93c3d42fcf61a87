"""Who a verified token speaks for: its claims mapped to a principal, the way Lakekeeper does.

Pure: no I/O. The claims given here must already be verified (signature, issuer, audience,
lifetime); this module only decides the user id, name, email and kind of user.

- id: the first present of the configured `subject_claims` (exactly one configured: it must
  be present; several configured and none present: fall through), else the provider's
  `fallback_claims` (`oid` then `sub` for Entra ID, where `oid` is unique across
  applications and `sub` is not; `sub` for every other provider); as `oidc~<subject>` for
  the default provider and `<key>~<subject>` for the one configured with `<key>`
  (domain/user_ids.py, ADR 0019).
- name: `name`, else `given_name`/`first_name` + `family_name`/`last_name`, else
  `app_displayname`, else `preferred_username`, else `Nameless App with ID oidc~<id>`.
- email: `email`, else `upn` or `preferred_username` when it holds an `@`.
- user_type: "human" when any of `name`, `given_name`, `family_name`, `first_name`,
  `last_name`, `email` is present, else "application" (machine tokens carry none of them).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from icelog.domain.user_ids import user_id

MAX_SUBJECT_CHARS = 256
MAX_NAME_CHARS = 512
MAX_EMAIL_CHARS = 512

_HUMAN_CLAIMS = ("name", "given_name", "family_name", "first_name", "last_name", "email")


class InvalidToken(Exception):
    """A bearer token was refused. The message is safe to show to the client: it names the
    reason only, never the token, its claims' values or key material."""


@dataclass(frozen=True)
class Principal:
    user_id: str  # "oidc~<subject>" or "<provider key>~<subject>"
    name: str
    email: str | None
    user_type: Literal["human", "application"]
    issuer: str


def principal_from_claims(
    claims: Mapping[str, Any],
    *,
    issuer: str,
    subject_claims: Sequence[str] = (),
    provider_key: str | None = None,
    fallback_claims: Sequence[str] = ("sub",),
) -> Principal:
    """The principal of verified `claims` from the provider with `provider_key` (None: the
    default provider); `InvalidToken` when no usable subject is found."""
    found = user_id(provider_key, _subject(claims, subject_claims, fallback_claims))
    email = _email(claims)
    return Principal(
        user_id=found,
        name=_name(claims) or f"Nameless App with ID {found}",
        email=email,
        user_type="human" if any(_text(claims, c) for c in _HUMAN_CLAIMS) else "application",
        issuer=issuer,
    )


def _subject(
    claims: Mapping[str, Any], subject_claims: Sequence[str], fallback_claims: Sequence[str]
) -> str:
    for claim in subject_claims:
        if claims.get(claim) is not None:
            return _valid_subject(claims[claim])
    if len(subject_claims) == 1:
        # One configured claim is a contract with the IdP: falling back to `sub` would
        # silently give the same person a second identity.
        raise InvalidToken("token lacks the configured subject claim")
    for claim in fallback_claims:
        if claims.get(claim) is not None:
            return _valid_subject(claims[claim])
    raise InvalidToken("token has no subject")


def _valid_subject(value: object) -> str:
    # bool is an int subclass, and `oidc~True` is no identity.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_SUBJECT_CHARS
        or _has_control_chars(value)
    ):
        raise InvalidToken("token subject is invalid")
    return value


def _name(claims: Mapping[str, Any]) -> str | None:
    given = _text(claims, "given_name") or _text(claims, "first_name")
    family = _text(claims, "family_name") or _text(claims, "last_name")
    full = " ".join(part for part in (given, family) if part) or None
    name = (
        _text(claims, "name")
        or full
        or _text(claims, "app_displayname")
        or _text(claims, "preferred_username")
    )
    return name[:MAX_NAME_CHARS] if name else None


def _email(claims: Mapping[str, Any]) -> str | None:
    candidates = (
        _text(claims, "email"),
        _with_at(_text(claims, "upn")),
        _with_at(_text(claims, "preferred_username")),
    )
    # A cut address would be someone else's (or no one's): an over-long one is dropped.
    return next((e for e in candidates if e and len(e) <= MAX_EMAIL_CHARS), None)


def _with_at(value: str | None) -> str | None:
    return value if value and "@" in value else None


def _text(claims: Mapping[str, Any], claim: str) -> str | None:
    """The claim as display text: a non-blank string without control characters, else None."""
    value = claims.get(claim)
    if not isinstance(value, str) or not value.strip() or _has_control_chars(value):
        return None
    return value.strip()


def _has_control_chars(value: str) -> bool:
    # Control characters (newlines, NUL, escapes) would let a token forge log lines or
    # terminal output wherever the id or name is printed.
    return any(unicodedata.category(ch) == "Cc" for ch in value)
