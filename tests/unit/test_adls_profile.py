"""ADLS storage profiles and credentials: what is stored, what is refused (and how the
refusal reads), and when a sealed credential may serve an edited profile."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from icelog.commands.storage.adls import KIND
from icelog.commands.storage.adls.form import FORM
from icelog.commands.storage.adls.models import (
    AdlsProfile,
    AzClientCredentials,
    AzCredential,
    AzSharedAccessKeyCredential,
    AzStorageCredential,
)
from icelog.commands.storage.adls.profile import normalize_credential, normalize_profile
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import BadRequestError

KEY = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1uZXZlci1iZS1zaG93bg=="
SHARED = {"type": "az", "credential-type": "shared-access-key", "key": KEY}
SECRET = "client-secret-never-shown"
PRINCIPAL = {
    "type": "az",
    "credential-type": "client-credentials",
    "client-id": "00000000-0000-0000-0000-000000000001",
    "tenant-id": "contoso.onmicrosoft.com",
    "client-secret": SECRET,
}


def profile(**fields: Any) -> dict[str, Any]:
    return {"type": "adls", "account-name": "lakeacct", "filesystem": "lake", **fields}


def test_defaults_are_filled_in_and_the_base_location_derived() -> None:
    stored = normalize_profile(profile(**{"key-prefix": "/warehouses/sales/"}))
    assert stored == {
        "type": "adls",
        "account-name": "lakeacct",
        "filesystem": "lake",
        "key-prefix": "warehouses/sales",
        "host": "dfs.core.windows.net",
        "endpoint": None,
        "authority-host": None,
        "sas-enabled": True,
        "sas-scope": "directory",
        "sas-token-validity-seconds": 3600,
        "allow-alternative-protocols": False,
        "storage-layout": None,
        "base-location": "abfss://lake@lakeacct.dfs.core.windows.net/warehouses/sales",
    }
    # What GET warehouse returns is accepted back unchanged.
    assert normalize_profile({**stored, "credential-id": "x"}) == stored


def test_every_field_is_kept() -> None:
    layout = {"type": "full-hierarchy", "namespace": "{name}", "tabular": "{name}-{uuid}"}
    stored = normalize_profile(
        profile(
            host="DFS.core.chinacloudapi.cn",
            endpoint="http://127.0.0.1:10000/lakeacct/",
            **{
                "authority-host": "https://login.chinacloudapi.cn/",
                "sas-enabled": False,
                "sas-token-validity-seconds": 604800,
                "allow-alternative-protocols": True,
                "storage-layout": layout,
            },
        )
    )
    assert stored["host"] == "dfs.core.chinacloudapi.cn"
    assert stored["endpoint"] == "http://127.0.0.1:10000/lakeacct"
    assert stored["authority-host"] == "https://login.chinacloudapi.cn"
    assert stored["sas-enabled"] is False
    assert stored["sas-token-validity-seconds"] == 604800
    assert stored["allow-alternative-protocols"] is True
    assert stored["storage-layout"] == layout
    assert stored["base-location"] == "abfss://lake@lakeacct.dfs.core.chinacloudapi.cn"


@pytest.mark.attack
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"bucket": "x"}, "unsupported field(s): bucket"),
        ({"sas_enabled": True}, "unsupported field(s): sas_enabled"),
        ({"account-name": 5}, "account-name"),
        ({"account-name": "Lake"}, "account-name"),
        ({"account-name": "ab"}, "account-name"),
        ({"account-name": "lake.evil.example"}, "account-name"),
        ({"account-name": "a" * 25}, "account-name"),
        ({"filesystem": "ab"}, "filesystem"),
        ({"filesystem": "a--b"}, "filesystem"),
        ({"filesystem": "-ab"}, "filesystem"),
        ({"filesystem": "$root"}, "filesystem"),
        ({"filesystem": "Lake"}, "filesystem"),
        ({"filesystem": "lake@other"}, "filesystem"),
        ({"filesystem": ["lake"]}, "filesystem"),
        ({"key-prefix": "a/../b"}, "key-prefix"),
        ({"key-prefix": "a//b"}, "key-prefix"),
        ({"key-prefix": "a\x00b"}, "key-prefix"),
        ({"key-prefix": "a%2e%2e"}, "key-prefix"),
        ({"key-prefix": "a?sig=x"}, "key-prefix"),
        ({"key-prefix": "x" * 513}, "key-prefix"),
        ({"key-prefix": 7}, "key-prefix"),
        ({"host": "evil"}, "host"),
        ({"host": "dfs.core.windows.net/x"}, "host"),
        ({"host": "blob.example.com"}, "endpoint (the Blob API URL) is required"),
        ({"endpoint": "ftp://127.0.0.1/x"}, "endpoint"),
        ({"endpoint": "http://user:pw@127.0.0.1:10000/x"}, "without user information"),
        ({"endpoint": "https://a.blob.core.windows.net/?sv=1&sig=x"}, "without user"),
        ({"endpoint": "http://127.0.0.1:99999"}, "endpoint"),
        ({"endpoint": "http:///nohost"}, "endpoint"),
        ({"authority-host": "http://login.example"}, "authority-host must be an https URL"),
        ({"authority-host": "https://u:p@login.example"}, "without user information"),
        ({"sas-enabled": "yes"}, "sas-enabled must be true or false"),
        ({"allow-alternative-protocols": 1}, "allow-alternative-protocols"),
        ({"sas-token-validity-seconds": "3600"}, "sas-token-validity-seconds"),
        ({"sas-token-validity-seconds": True}, "sas-token-validity-seconds"),
        ({"sas-token-validity-seconds": 0}, "sas-token-validity-seconds"),
        ({"sas-token-validity-seconds": 59}, "sas-token-validity-seconds"),
        ({"sas-token-validity-seconds": 604801}, "sas-token-validity-seconds"),
        ({"sas-token-validity-seconds": 3600.5}, "sas-token-validity-seconds"),
        ({"storage-layout": "flat"}, "storage-layout must be an object"),
        ({"type": "s3"}, "type must be 'adls'"),
    ],
)
def test_hostile_profiles_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequestError) as refused:
        KIND.normalize(profile(**fields), SHARED, StoragePolicy())
    assert message in refused.value.message


def test_an_endpoint_with_a_credential_is_never_echoed() -> None:
    with pytest.raises(BadRequestError) as refused:
        normalize_profile(profile(endpoint="https://a.blob.core.windows.net/?sig=SECRETSIG"))
    assert "SECRETSIG" not in refused.value.message


@pytest.mark.attack
@pytest.mark.parametrize(
    ("credential", "message"),
    [
        (None, "storage-credential is required"),
        ("key", "storage-credential is required"),
        ({**SHARED, "type": "s3"}, "type must be 'az'"),
        ({**SHARED, "credential-type": "access-key"}, "credential-type must be"),
        ({"type": "az", "credential-type": "azure-system-identity"}, "is not supported"),
        ({**SHARED, "key": "not base64!"}, "storage-credential.key"),
        ({**SHARED, "key": ""}, "storage-credential.key"),
        ({**SHARED, "key": 5}, "storage-credential.key"),
        ({**SHARED, "client-secret": SECRET}, "unsupported field(s): client-secret"),
        ({**PRINCIPAL, "client-secret": ""}, "client-secret is required"),
        ({**PRINCIPAL, "tenant-id": "../x"}, "tenant-id"),
        ({**PRINCIPAL, "tenant-id": "a/b"}, "tenant-id"),
        ({**PRINCIPAL, "client-id": "x&scope=y"}, "client-id"),
        ({**PRINCIPAL, "key": KEY}, "unsupported field(s): key"),
    ],
)
def test_hostile_credentials_are_refused_without_echoing_secrets(
    credential: Any, message: str
) -> None:
    with pytest.raises(BadRequestError) as refused:
        normalize_credential(credential)
    assert message in refused.value.message
    assert KEY not in refused.value.message and SECRET not in refused.value.message


def test_credentials_are_sealed_as_given() -> None:
    assert normalize_credential(SHARED) == SHARED
    assert normalize_credential(PRINCIPAL) == PRINCIPAL


@pytest.mark.parametrize(
    ("change", "keeps"),
    [
        ({}, True),
        ({"key-prefix": "elsewhere"}, True),
        ({"sas-token-validity-seconds": 900}, True),
        ({"sas-enabled": False}, True),
        ({"account-name": "otheracct"}, False),
        ({"filesystem": "other"}, False),
        ({"host": "dfs.core.usgovcloudapi.net"}, False),
        # A bearer token or a SAS would go to another endpoint, a client secret to another
        # authority: a profile edit alone must never redirect the sealed credential.
        ({"endpoint": "https://attacker.example"}, False),
        ({"authority-host": "https://attacker.example"}, False),
    ],
)
def test_a_sealed_credential_follows_only_the_same_storage(
    change: dict[str, Any], keeps: bool
) -> None:
    old = normalize_profile(profile())
    new = normalize_profile({**profile(), **change})
    assert KIND.keeps_credential(old, new) is keeps


def test_the_default_endpoint_counts_as_the_same_endpoint() -> None:
    old = normalize_profile(profile())
    new = normalize_profile(profile(endpoint="https://lakeacct.blob.core.windows.net"))
    assert KIND.keeps_credential(old, new)


def test_the_policy_decides_where_the_catalog_connects() -> None:
    policy = StoragePolicy(s3_endpoint_hosts=("127.0.0.1:10000",))
    KIND.normalize(profile(endpoint="http://127.0.0.1:10000/lakeacct"), SHARED, policy)
    # Azure's own defaults are always allowed; a host the operator did not list is not.
    KIND.normalize(profile(), SHARED, policy)
    with pytest.raises(BadRequestError, match="authority-host is not an allowed"):
        KIND.normalize(profile(**{"authority-host": "https://forbidden.example"}), SHARED, policy)
    with pytest.raises(BadRequestError, match="endpoint is not an allowed"):
        KIND.normalize(profile(endpoint="http://10.0.0.8:10000/lakeacct"), SHARED, policy)


def test_storage_root_is_the_base_location() -> None:
    stored = normalize_profile(profile(**{"key-prefix": "wh"}))
    assert str(KIND.storage_root(stored)) == "abfss://lake@lakeacct.dfs.core.windows.net/wh"
    assert KIND.vends(stored) and not KIND.vends({**stored, "sas-enabled": False})


# -- the API models -------------------------------------------------------------------------


def test_the_profile_model_takes_lakekeepers_shape() -> None:
    body = {
        "type": "adls",
        "account-name": "lakeacct",
        "filesystem": "lake",
        "key-prefix": "wh",
        "host": "dfs.core.windows.net",
        "authority-host": "https://login.microsoftonline.com",
        "sas-enabled": True,
        "sas-token-validity-seconds": 3600,
        "allow-alternative-protocols": False,
        "storage-layout": {"type": "default"},
        "endpoint": "http://127.0.0.1:10000/lakeacct",
    }
    model = AdlsProfile.model_validate(body)
    assert model.model_dump(by_alias=True, exclude_none=True) == body
    # What the model lets through, the kind takes too.
    KIND.normalize(model.model_dump(by_alias=True, exclude_none=True), SHARED, StoragePolicy())
    with pytest.raises(ValidationError):
        AdlsProfile.model_validate({**body, "sas-enabeld": False})
    with pytest.raises(ValidationError):
        AdlsProfile.model_validate({**body, "sas-enabled": "true"})


def test_the_credential_models_never_show_their_secrets() -> None:
    credential = TypeAdapter(AzCredential).validate_python(PRINCIPAL)
    assert isinstance(credential, AzClientCredentials)
    assert SECRET not in repr(credential) and SECRET not in str(credential)
    shared = TypeAdapter(AzCredential).validate_python(SHARED)
    assert isinstance(shared, AzSharedAccessKeyCredential)
    assert KEY not in repr(shared)
    with pytest.raises(ValidationError):
        TypeAdapter(AzCredential).validate_python({**SHARED, "credential-type": "other"})


def test_the_form_names_only_fields_the_kind_takes() -> None:
    def fields(model: Any) -> set[str]:
        return set(model.model_json_schema(by_alias=True)["properties"])

    profile = {f.key for f in FORM.fields if f.part == "profile"}
    credential = {f.key for f in FORM.fields if f.part == "credential"}
    assert profile <= fields(AdlsProfile)
    assert credential <= fields(AzStorageCredential)
    assert {f.key for f in FORM.fields if f.secret} == {"key", "client-secret"}
    assert KIND.form is FORM and KIND.profile_model is AdlsProfile


def test_the_api_credential_model_takes_either_variant_and_only_its_fields() -> None:
    assert AzStorageCredential.model_validate(SHARED).key == KEY
    assert AzStorageCredential.model_validate(PRINCIPAL).client_secret == SECRET
    for wrong in (
        {"type": "az", "credential-type": "shared-access-key"},  # no key
        {**SHARED, "client-id": "x"},  # a field of the other variant
        {k: v for k, v in PRINCIPAL.items() if k != "tenant-id"},
    ):
        with pytest.raises(ValidationError) as raised:
            AzStorageCredential.model_validate(wrong)
        assert KEY not in str(raised.value) and SECRET not in str(raised.value)
    assert KEY not in repr(AzStorageCredential.model_validate(SHARED))


def test_a_filesystem_wide_sas_only_for_a_warehouse_owning_its_filesystem() -> None:
    assert normalize_profile(profile(**{"sas-scope": "filesystem"}))["sas-scope"] == "filesystem"
    # With a key-prefix another warehouse may live beside it in the filesystem: its tokens
    # would open that warehouse's tables too.
    with pytest.raises(BadRequestError, match="owns its whole"):
        normalize_profile(profile(**{"sas-scope": "filesystem", "key-prefix": "wh"}))
    with pytest.raises(BadRequestError, match="'directory' or 'filesystem'"):
        normalize_profile(profile(**{"sas-scope": "container"}))
