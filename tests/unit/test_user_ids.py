"""User ids per provider (domain/user_ids.py, ADR 0019): built, parsed, never colliding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icelog.domain.user_ids import (
    UserId,
    is_entra,
    is_user_id,
    parse_provider_entry,
    parse_user_id,
    subject_claim_order,
    user_id,
    valid_key,
)

KEYS = st.one_of(
    st.none(),
    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,31}", fullmatch=True).filter(valid_key),
)
SUBJECTS = st.text(min_size=1, max_size=64)


def test_the_default_provider_keeps_lakekeepers_ids() -> None:
    assert user_id(None, "alice") == "oidc~alice"
    assert parse_user_id("oidc~alice") == UserId(None, "alice")


def test_a_keyed_provider_has_lakekeepers_idp_prefix() -> None:
    assert user_id("okta", "alice") == "okta~alice"
    assert parse_user_id("okta~alice") == UserId("okta", "alice")
    assert (
        str(UserId("eks_a", "system:serviceaccount:ns:app")) == "eks_a~system:serviceaccount:ns:app"
    )


@given(KEYS, SUBJECTS)
def test_parse_inverts_build(key: str | None, subject: str) -> None:
    assert parse_user_id(user_id(key, subject)) == UserId(key, subject)


@pytest.mark.attack
@given(KEYS, SUBJECTS, KEYS, SUBJECTS)
def test_two_providers_never_share_an_id(
    key_a: str | None, subject_a: str, key_b: str | None, subject_b: str
) -> None:
    """No subject of one provider spells a user of another."""
    if key_a != key_b:
        assert user_id(key_a, subject_a) != user_id(key_b, subject_b)


@pytest.mark.attack
def test_subjects_that_look_like_prefixes_stay_subjects() -> None:
    assert user_id(None, "b~x") == "oidc~b~x" != user_id("b", "x")
    assert parse_user_id("oidc~b~x") == UserId(None, "b~x")
    assert parse_user_id("b~~x") == UserId("b", "~x")


@pytest.mark.parametrize(
    "text", ["", "oidc~", "~x", "-b~x", "B~x", "anonymous", "system", "kubernetes~x",
             "a" * 33 + "~x", "OIDC~x", "a b~x"],
)  # fmt: skip
def test_what_is_no_user_id(text: str) -> None:
    assert not is_user_id(text)
    with pytest.raises(ValueError, match="not a user id"):
        parse_user_id(text)


def test_keys_and_subjects_are_checked_when_building() -> None:
    for bad in ("", "Corp", "-corp", "a" * 33, "a~b", "a b", "oidc", "kubernetes"):
        assert not valid_key(bad)
        with pytest.raises(ValueError, match="provider key"):
            user_id(bad, "x")
    with pytest.raises(ValueError, match="subject"):
        user_id(None, "")


def test_oid_is_tried_first_only_for_entra() -> None:
    entra = "https://login.microsoftonline.com/tenant-1/v2.0"
    assert is_entra(entra) and subject_claim_order(entra) == ("oid", "sub")
    assert is_entra("https://LOGIN.microsoftonline.us/t/v2.0")
    for other in ("https://keycloak.example/realms/x", "https://login.microsoftonline.com.evil.example/t",
                  "https://evil.example/login.microsoftonline.com"):  # fmt: skip
        assert not is_entra(other) and subject_claim_order(other) == ("sub",)


def test_provider_entries() -> None:
    assert parse_provider_entry("https://a.example") == (None, "https://a.example")
    assert parse_provider_entry("corp=https://b.example") == ("corp", "https://b.example")
    for reserved in ("oidc", "kubernetes"):
        with pytest.raises(ValueError, match="provider key"):
            parse_provider_entry(f"{reserved}=https://b.example")
    assert parse_provider_entry("https://c.example/x?a=b") == (None, "https://c.example/x?a=b")
    with pytest.raises(ValueError, match="provider key"):
        parse_provider_entry("Corp=https://b.example")
