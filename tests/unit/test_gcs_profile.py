"""GCS storage profiles and credentials: what is accepted, what is stored, what is refused
(and that no refusal quotes the key)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from icelog.commands.storage.gcs import KIND
from icelog.commands.storage.gcs.form import FORM
from icelog.commands.storage.gcs.models import GcsCredential, GcsProfile
from icelog.commands.storage.gcs.profile import (
    DEFAULT_ENDPOINT,
    DEFAULT_STS_ENDPOINT,
    normalize_gcs_credential,
    normalize_gcs_profile,
)
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import BadRequestError
from tests.support.gcs_server import ServiceKey, new_key, pem_body

EMULATOR = "http://127.0.0.1:4443"


@pytest.fixture(scope="module")
def key() -> ServiceKey:
    return new_key("https://oauth2.googleapis.com/token")


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(BadRequestError) as raised:
        call(*args)
    return raised.value.message


# -- profiles ----------------------------------------------------------------------------------
def test_a_minimal_profile_is_stored_with_every_field() -> None:
    assert normalize_gcs_profile({"type": "gcs", "bucket": "lake"}) == {
        "type": "gcs",
        "bucket": "lake",
        "key-prefix": "",
        "sts-enabled": True,  # Lakekeeper's default for GCS
        "storage-layout": None,
        "endpoint": DEFAULT_ENDPOINT,
        "sts-endpoint": DEFAULT_STS_ENDPOINT,
        "base-location": "gs://lake",
    }


def test_a_full_profile_keeps_its_values_and_derives_the_base_location() -> None:
    layout = {"type": "full-hierarchy", "namespace": "{name}-{uuid}", "tabular": "{name}"}
    stored = normalize_gcs_profile(
        {
            "type": "gcs",
            "bucket": "lake.example_1",
            "key-prefix": "/warehouses/sales/",
            "sts-enabled": False,
            "storage-layout": layout,
            "endpoint": f"{EMULATOR}/",
            "sts-endpoint": "http://127.0.0.1:9/v1/token",
        }
    )
    assert stored["key-prefix"] == "warehouses/sales"
    assert stored["base-location"] == "gs://lake.example_1/warehouses/sales"
    assert stored["storage-layout"] == layout  # the registry normalises layouts
    assert stored["endpoint"] == EMULATOR  # no trailing '/'
    assert stored["sts-enabled"] is False


def test_a_stored_profile_reads_back_as_itself() -> None:
    stored = normalize_gcs_profile({"type": "gcs", "bucket": "lake", "key-prefix": "a/b"})
    sent_back = {**stored, "credential-id": "2d3f6a8e-8d1c-4c55-9f39-1f0cbe2f3c11"}
    assert normalize_gcs_profile(sent_back) == stored


@pytest.mark.parametrize(
    "bucket",
    ["abc", "my_bucket-1", "a.b.c", "a" * 63, ".".join(["a" * 63] * 3) + "." + "a" * 30],
)
def test_bucket_names_google_allows(bucket: str) -> None:
    assert normalize_gcs_profile({"type": "gcs", "bucket": bucket})["bucket"] == bucket


@pytest.mark.attack
@pytest.mark.parametrize(
    "bucket",
    [
        None,
        12,
        "",
        "ab",
        "Lake",
        "-lake",
        "lake-",
        "la..ke",
        "a" * 64,
        "a" * 64 + ".b",
        "goog-lake",
        "my-google-lake",
        "g00gle-lake",
        "192.168.1.1",
        "lake/other",
        "lake'x",
        "lake x",
        "lake\nx",
    ],
)
def test_bucket_names_google_refuses(bucket: object) -> None:
    message = refused(normalize_gcs_profile, {"type": "gcs", "bucket": bucket})
    assert message.startswith("storage-profile.bucket must be a GCS bucket name")


@pytest.mark.attack
@pytest.mark.parametrize(
    "prefix",
    ["a//b", "a/../b", "a/./b", "..", "x'y", "a%2Fb", "a%2e%2e", "a\\b", "a\nb", "a\x00b", 5],
)
def test_key_prefixes_that_could_mean_two_places_or_break_a_rule_are_refused(
    prefix: object,
) -> None:
    refused(normalize_gcs_profile, {"type": "gcs", "bucket": "lake", "key-prefix": prefix})


def test_an_overlong_prefix_is_refused() -> None:
    refused(normalize_gcs_profile, {"type": "gcs", "bucket": "lake", "key-prefix": "p" * 1100})


@pytest.mark.attack
@pytest.mark.parametrize(
    "url",
    [
        "ftp://h/x",
        "http://user:pw@h",
        "http://token@h",
        "http://h/?q=1",
        "http://h/#f",
        "h:443",
        "http://h:99999",
        "http://",
        "http://h/a b",
        "http://h/\n",
        7,
    ],
)
@pytest.mark.parametrize("field", ["endpoint", "sts-endpoint"])
def test_endpoints_are_plain_http_urls(field: str, url: object) -> None:
    message = refused(normalize_gcs_profile, {"type": "gcs", "bucket": "lake", field: url})
    assert message.startswith(f"storage-profile.{field} must")
    assert "pw@" not in message and "token@" not in message  # never echoes the URL


@pytest.mark.parametrize("field", ["fancy", "region", "sts-role-arn", "flavor"])
def test_unknown_fields_are_refused_by_name(field: str) -> None:
    message = refused(normalize_gcs_profile, {"type": "gcs", "bucket": "lake", field: "x"})
    assert field in message


def test_sts_enabled_must_be_a_boolean() -> None:
    refused(normalize_gcs_profile, {"type": "gcs", "bucket": "lake", "sts-enabled": "true"})


# -- credentials -------------------------------------------------------------------------------
def test_a_key_is_sealed_with_its_known_fields(key: ServiceKey) -> None:
    sent = key.credential()
    sent["key"]["some_new_google_field"] = "x"  # key files grow fields: ignored, not kept
    sealed = normalize_gcs_credential(sent)
    assert sealed["type"] == "gcs" and sealed["credential-type"] == "service-account-key"
    assert sealed["key"] == key.info
    assert normalize_gcs_credential(sealed) == sealed  # what is sealed reads back as itself


def test_a_pasted_key_file_is_read_as_its_object(key: ServiceKey) -> None:
    sent = {**key.credential(), "key": json.dumps(key.info)}
    assert normalize_gcs_credential(sent)["key"] == key.info


def test_optional_key_fields_take_googles_defaults(key: ServiceKey) -> None:
    required = ("type", "project_id", "private_key_id", "private_key", "client_email")
    sealed = normalize_gcs_credential(
        {**key.credential(), "key": {k: key.info[k] for k in required}}
    )
    assert sealed["key"]["token_uri"] == "https://oauth2.googleapis.com/token"
    assert sealed["key"]["universe_domain"] == "googleapis.com"


def _with(key: ServiceKey, **changes: Any) -> dict[str, Any]:
    info: dict[str, Any] = {**key.info, **changes}
    return {**key.credential(), "key": {k: v for k, v in info.items() if v is not ...}}


@pytest.mark.attack
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"private_key": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"},
            "private_key is not an RSA private key",
        ),
        ({"private_key": ...}, "private_key is required"),
        ({"client_email": ...}, "client_email is required"),
        ({"project_id": ...}, "project_id is required"),
        ({"private_key_id": ...}, "private_key_id is required"),
        ({"type": "authorized_user"}, "type must be 'service_account'"),
        ({"client_email": "not-an-email"}, "client_email is not an e-mail address"),
        ({"client_email": "a@b\nc"}, "control characters"),
        ({"project_id": "Bad Project"}, "project_id is not a GCP project id"),
        ({"token_uri": "http://user:pw@evil/token"}, "token_uri must be scheme://host"),
        ({"token_uri": "file:///etc/passwd"}, "token_uri must be an http(s) URL"),
        ({"universe_domain": "example.com"}, "universe_domain must be 'googleapis.com'"),
        ({"client_id": 5}, "client_id must be a string"),
    ],
)
def test_bad_keys_are_refused_without_quoting_them(
    key: ServiceKey, change: dict[str, Any], expected: str
) -> None:
    message = refused(normalize_gcs_credential, _with(key, **change))
    assert expected in message
    assert pem_body(key) not in message
    assert "not a key" not in message


@pytest.mark.parametrize(
    ("credential", "expected"),
    [
        (None, "needs a storage-credential"),
        ("key", "must be an object"),
        ({"type": "s3", "credential-type": "service-account-key"}, "type must be 'gcs'"),
        ({"type": "gcs", "credential-type": "gcp-system-identity"}, "service-account-key"),
        (
            {"type": "gcs", "credential-type": "service-account-key", "key": "{not json"},
            "must be a service-account key",
        ),
        (
            {"type": "gcs", "credential-type": "service-account-key", "key": []},
            "must be a service-account key",
        ),
    ],
)
def test_credentials_of_another_shape_are_refused(credential: object, expected: str) -> None:
    assert expected in refused(normalize_gcs_credential, credential)


def test_extra_credential_fields_are_refused(key: ServiceKey) -> None:
    sent = {**key.credential(), "access-key-id": "x"}
    assert "access-key-id" in refused(normalize_gcs_credential, sent)


def test_a_key_file_pasted_with_its_private_key_broken_is_not_quoted(key: ServiceKey) -> None:
    text = json.dumps(key.info)[:-40]  # cut inside: not JSON any more
    message = refused(normalize_gcs_credential, {**key.credential(), "key": text})
    assert pem_body(key) not in message


# -- the management API's models ---------------------------------------------------------------
def test_the_profile_model_takes_lakekeepers_names_and_refuses_others() -> None:
    model = GcsProfile.model_validate(
        {"type": "gcs", "bucket": "lake", "key-prefix": "wh", "sts-enabled": True}
    )
    as_sent = model.model_dump(by_alias=True, exclude_none=True)
    assert normalize_gcs_profile(as_sent)["base-location"] == "gs://lake/wh"
    with pytest.raises(ValidationError):
        GcsProfile.model_validate({"type": "gcs", "bucket": "lake", "region": "eu"})
    with pytest.raises(ValidationError):
        GcsProfile.model_validate({"type": "gcs", "bucket": "lake", "sts-enabled": "yes"})


def test_the_credential_model_never_shows_the_private_key(key: ServiceKey) -> None:
    model = GcsCredential.model_validate(key.credential())
    assert pem_body(key) not in repr(model)
    assert pem_body(key) not in str(model)
    dumped = model.model_dump(by_alias=True, exclude_none=True)
    assert normalize_gcs_credential(dumped)["key"] == key.info
    pasted = GcsCredential.model_validate({**key.credential(), "key": json.dumps(key.info)})
    assert pasted.key.private_key == key.info["private_key"]


def test_a_bad_pasted_key_is_a_validation_error_without_the_text(key: ServiceKey) -> None:
    with pytest.raises(ValidationError) as raised:
        GcsCredential.model_validate({**key.credential(), "key": json.dumps(key.info)[:-3]})
    problems = raised.value.errors(include_input=False)
    assert pem_body(key) not in json.dumps(problems, default=str)


def test_the_form_names_fields_of_the_models() -> None:
    profile_fields = set(GcsProfile.model_json_schema(by_alias=True)["properties"])
    assert {f.key for f in FORM.fields if f.part == "profile"} <= profile_fields
    assert {f.key for f in FORM.fields if f.part == "credential"} <= set(GcsCredential.model_fields)
    assert [f.key for f in FORM.fields if f.required] == ["bucket", "key"]
    assert [f.key for f in FORM.fields if f.secret] == ["key"]
    assert KIND.form is FORM and KIND.credential_model is GcsCredential


# -- the kind's pure parts ---------------------------------------------------------------------
def test_the_kind_normalises_both_and_names_itself(key: ServiceKey) -> None:
    assert KIND.name == "gcs"
    profile, sealed = KIND.normalize(
        {"type": "gcs", "bucket": "lake"}, key.credential(), StoragePolicy()
    )
    assert profile["base-location"] == "gs://lake"
    assert sealed is not None and sealed["key"] == key.info
    assert str(KIND.storage_root(profile)) == "gs://lake"
    assert KIND.vends(profile)
    assert not KIND.vends({**profile, "sts-enabled": False})


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        ({}, True),
        ({"sts-enabled": False}, True),
        ({"storage-layout": {"type": "default"}}, True),
        ({"bucket": "other-lake"}, False),
        ({"endpoint": "http://collector.example:80"}, False),
        ({"sts-endpoint": "http://collector.example/v1/token"}, False),
    ],
)
def test_the_key_stays_only_with_the_store_and_sts_it_was_given_for(
    change: dict[str, Any], kept: bool
) -> None:
    old = normalize_gcs_profile({"type": "gcs", "bucket": "lake"})
    assert KIND.keeps_credential(old, {**old, **change}) is kept


def test_client_config_names_only_an_endpoint_that_is_not_googles() -> None:
    google = normalize_gcs_profile({"type": "gcs", "bucket": "lake"})
    assert KIND.client_config(google) == {}
    emulator = normalize_gcs_profile({"type": "gcs", "bucket": "lake", "endpoint": EMULATOR})
    assert KIND.client_config(emulator) == {"gcs.service.host": EMULATOR}


@pytest.mark.attack
@pytest.mark.parametrize(
    ("profile_change", "token_uri"),
    [
        ({"endpoint": "http://10.0.0.8:4443"}, "https://oauth2.googleapis.com/token"),
        ({"sts-endpoint": "http://10.0.0.8/v1/token"}, "https://oauth2.googleapis.com/token"),
        ({}, "http://10.0.0.8/token"),
    ],
)
def test_the_operators_endpoint_list_covers_every_url_a_token_goes_to(
    key: ServiceKey, profile_change: dict[str, Any], token_uri: str
) -> None:
    policy = StoragePolicy(s3_endpoint_hosts=("127.0.0.1:4443",))
    profile = {"type": "gcs", "bucket": "lake", **profile_change}
    credential = _with(key, token_uri=token_uri)
    message = refused(KIND.normalize, profile, credential, policy)
    assert "may not reach" in message
    # Google's own endpoints and the listed host are fine.
    KIND.normalize(
        {"type": "gcs", "bucket": "lake", "endpoint": EMULATOR}, key.credential(), policy
    )
