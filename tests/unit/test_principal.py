"""Token claims → principal (id, name, email, kind), as Lakekeeper maps them. Pure."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from icelog.api.auth.principal import InvalidToken, Principal, principal_from_claims

ISS = "https://idp.example/realms/icelog"


def principal(claims: dict[str, Any], *subject_claims: str) -> Principal:
    return principal_from_claims(claims, issuer=ISS, subject_claims=subject_claims)


# -- the id -------------------------------------------------------------------------------


def test_sub_is_the_id_and_the_issuer_is_kept() -> None:
    p = principal({"sub": "alice"})
    assert p.user_id == "oidc~alice"
    assert p.issuer == ISS


def test_oid_is_preferred_over_sub_only_where_the_provider_says_so() -> None:
    claims = {"sub": "pairwise-1", "oid": "object-9"}
    assert principal(claims).user_id == "oidc~pairwise-1"
    entra = principal_from_claims(claims, issuer=ISS, fallback_claims=("oid", "sub"))
    assert entra.user_id == "oidc~object-9"


def test_a_keyed_provider_has_its_own_ids() -> None:
    found = principal_from_claims({"sub": "alice"}, issuer=ISS, provider_key="corp")
    assert found.user_id == "corp~alice"
    assert found.name == "Nameless App with ID corp~alice"


def test_a_configured_subject_claim_wins_over_oid_and_sub() -> None:
    claims = {"sub": "s", "oid": "o", "email": "carol@example.com"}
    assert principal(claims, "email").user_id == "oidc~carol@example.com"
    entra = principal_from_claims(
        claims, issuer=ISS, subject_claims=("email",), fallback_claims=("oid", "sub")
    )
    assert entra.user_id == "oidc~carol@example.com"


def test_a_single_configured_subject_claim_must_be_present() -> None:
    with pytest.raises(InvalidToken, match="configured subject claim"):
        principal({"sub": "s", "oid": "o"}, "employee_id")


def test_several_subject_claims_are_tried_in_order() -> None:
    claims = {"sub": "s", "upn": "u@example.com", "employee_id": "e-7"}
    assert principal(claims, "missing", "employee_id", "upn").user_id == "oidc~e-7"


def test_several_subject_claims_none_present_fall_back_to_the_providers_claims() -> None:
    assert principal({"sub": "s", "oid": "o"}, "a", "b").user_id == "oidc~s"
    entra = principal_from_claims(
        {"sub": "s", "oid": "o"}, issuer=ISS, subject_claims=("a", "b"),
        fallback_claims=("oid", "sub"),
    )  # fmt: skip
    assert entra.user_id == "oidc~o"
    assert principal({"sub": "s"}, "a", "b").user_id == "oidc~s"


def test_an_integer_subject_is_stringified() -> None:
    assert principal({"sub": 4711}).user_id == "oidc~4711"


def test_no_subject_is_refused() -> None:
    with pytest.raises(InvalidToken, match="no subject"):
        principal({"name": "Nobody"})


@pytest.mark.parametrize(
    "subject",
    ["", "a\nb", "tab\there", "nul\x00", "x" * 257, True, 1.5, ["alice"], {"id": "alice"}],
)
def test_invalid_subjects_are_refused(subject: object) -> None:
    with pytest.raises(InvalidToken, match="subject is invalid") as refused:
        principal({"sub": subject})
    assert "alice" not in str(refused.value)


def test_a_subject_of_256_chars_is_accepted() -> None:
    assert principal({"sub": "x" * 256}).user_id == "oidc~" + "x" * 256


def test_a_present_but_invalid_configured_claim_does_not_fall_back() -> None:
    with pytest.raises(InvalidToken, match="subject is invalid"):
        principal({"sub": "s", "employee_id": ""}, "employee_id", "upn")


# -- the name -----------------------------------------------------------------------------


def test_name_claim_first() -> None:
    claims = {"sub": "s", "name": "Alice A.", "given_name": "Alice", "family_name": "Adams"}
    assert principal(claims).name == "Alice A."


@pytest.mark.parametrize(
    ("claims", "name"),
    [
        ({"given_name": "Alice", "family_name": "Adams"}, "Alice Adams"),
        ({"first_name": "Bob", "last_name": "Brown"}, "Bob Brown"),
        ({"given_name": "Cher"}, "Cher"),
        ({"last_name": "Doe"}, "Doe"),
        ({"given_name": "Eve", "app_displayname": "App"}, "Eve"),
        ({"app_displayname": "Spark ETL", "preferred_username": "svc"}, "Spark ETL"),
        ({"preferred_username": "service-account-spark"}, "service-account-spark"),
    ],
)
def test_name_fallbacks(claims: dict[str, Any], name: str) -> None:
    assert principal({"sub": "s", **claims}).name == name


def test_nameless_app() -> None:
    assert principal({"sub": "c0ffee"}).name == "Nameless App with ID oidc~c0ffee"


def test_blank_non_string_or_control_char_names_are_ignored() -> None:
    claims = {"sub": "s", "name": "  ", "given_name": 7, "app_displayname": "x\x1b[31m"}
    assert principal({**claims, "preferred_username": "ok"}).name == "ok"


def test_names_are_capped_at_512_chars() -> None:
    assert principal({"sub": "s", "name": "n" * 2000}).name == "n" * 512


# -- the email ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "email"),
    [
        ({"email": "a@example.com", "upn": "b@example.com"}, "a@example.com"),
        ({"upn": "b@example.com", "preferred_username": "c@example.com"}, "b@example.com"),
        ({"upn": "DOMAIN\\bob", "preferred_username": "c@example.com"}, "c@example.com"),
        ({"preferred_username": "carol"}, None),
        ({}, None),
    ],
)
def test_email_fallbacks(claims: dict[str, Any], email: str | None) -> None:
    assert principal({"sub": "s", **claims}).email == email


def test_an_over_long_email_is_dropped_not_cut() -> None:
    long = "a" * 510 + "@example.com"
    assert principal({"sub": "s", "email": long, "upn": "u@example.com"}).email == "u@example.com"


# -- human or application -----------------------------------------------------------------


@pytest.mark.parametrize(
    "claim", ["name", "given_name", "family_name", "first_name", "last_name", "email"]
)
def test_a_personal_claim_makes_a_human(claim: str) -> None:
    assert principal({"sub": "s", claim: "x@example.com"}).user_type == "human"


@pytest.mark.parametrize(
    "claims",
    [
        {},
        {"app_displayname": "Spark ETL", "appid": "1234"},
        {"preferred_username": "service-account-spark", "azp": "spark"},
        {"upn": "svc@example.com"},
    ],
)
def test_without_personal_claims_it_is_an_application(claims: dict[str, Any]) -> None:
    assert principal({"sub": "s", **claims}).user_type == "application"


def test_entra_user_token() -> None:
    claims = {
        "sub": "pairwise",
        "oid": "f40f8462-da7f-457c-bd8c-d9e5639d2975",
        "name": "Max van Kampen",
        "given_name": "Max",
        "family_name": "van Kampen",
        "upn": "max@example.com",
        "app_displayname": "Lakekeeper UI",
    }
    entra = principal_from_claims(claims, issuer=ISS, fallback_claims=("oid", "sub"))
    assert entra == Principal(
        user_id="oidc~f40f8462-da7f-457c-bd8c-d9e5639d2975",
        name="Max van Kampen",
        email="max@example.com",
        user_type="human",
        issuer=ISS,
    )


def test_principal_is_frozen() -> None:
    p = principal({"sub": "s"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(p, "name", "other")  # noqa: B010 (the attribute is read-only to mypy too)
