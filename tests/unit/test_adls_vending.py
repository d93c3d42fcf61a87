"""ADLS SAS vending without a service: the config keys clients read, the SAS window and
scope refusals, and the cache (a signer that records its calls stands in for signing)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from icelog.commands.storage.adls.profile import normalize_profile
from icelog.commands.storage.adls.sas import SignedSas, directory_sas, validity_window
from icelog.commands.storage.adls.vending import SasVendor, client_config, sas_config
from icelog.domain.errors import BadRequestError, UnsupportedOperationError
from tests.support import sas_check

KEY = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1uZXZlci1iZS1zaG93bg=="
SHARED = {"type": "az", "credential-type": "shared-access-key", "key": KEY}
SAS = SignedSas("sv=2026-10-06&sr=d&sdd=2&sp=rl&sig=abc", dt.datetime(2030, 1, 1, tzinfo=dt.UTC))


def profile(**fields: Any) -> dict[str, Any]:
    return normalize_profile(
        {"type": "adls", "account-name": "lakeacct", "filesystem": "lake", **fields}
    )


def test_public_cloud_needs_no_endpoint_keys() -> None:
    stored = profile()
    assert client_config(stored) == {}
    assert sas_config(stored, SAS) == {
        "adls.sas-token.lakeacct.dfs.core.windows.net": SAS.token,
        "adls.sas-token-expires-at-ms.lakeacct.dfs.core.windows.net": "1893456000000",
    }


def test_an_emulator_is_reached_through_a_connection_string() -> None:
    stored = profile(endpoint="http://127.0.0.1:10000/lakeacct")
    assert client_config(stored) == {
        "adls.connection-string.lakeacct.dfs.core.windows.net": "http://127.0.0.1:10000/lakeacct"
    }
    config = sas_config(stored, SAS)
    assert config["adls.connection-string"] == (
        f"BlobEndpoint=http://127.0.0.1:10000/lakeacct;SharedAccessSignature={SAS.token}"
    )
    assert "adls.account-host" not in config  # adlfs would make it https://


def test_another_cloud_gets_its_account_host() -> None:
    stored = profile(host="dfs.core.chinacloudapi.cn")
    assert client_config(stored) == {
        "adls.connection-string.lakeacct.dfs.core.chinacloudapi.cn": (
            "https://lakeacct.blob.core.chinacloudapi.cn"
        ),
        "adls.account-host": "lakeacct.blob.core.chinacloudapi.cn",
    }
    assert "adls.sas-token.lakeacct.dfs.core.chinacloudapi.cn" in sas_config(stored, SAS)


def test_the_validity_window_starts_a_minute_back() -> None:
    now = dt.datetime(2030, 1, 1, 12, 0, 0, 500_000, tzinfo=dt.UTC)
    start, expiry = validity_window(now, 900)
    assert start == dt.datetime(2030, 1, 1, 11, 59, tzinfo=dt.UTC)
    assert expiry == dt.datetime(2030, 1, 1, 12, 15, tzinfo=dt.UTC)


def test_a_directory_sas_signs_the_directory() -> None:
    start, expiry = validity_window(dt.datetime.now(dt.UTC), 3600)
    signed = directory_sas(
        account="lakeacct",
        filesystem="lake",
        directory="wh/db/t1",
        write=False,
        start=start,
        expiry=expiry,
        account_key=KEY,
    )
    f = sas_check.fields(signed.token)
    assert (f["sr"], f["sdd"], f["sp"]) == ("d", "3", "rl")
    resource = sas_check.canonical_resource("lakeacct", "lake", "wh/db/t1")
    assert sas_check.signature(f, resource, KEY, delegation=False) == f["sig"]
    assert "sig=" not in repr(signed) and signed.token not in repr(signed)
    for directory in ("", "/wh", "wh/"):
        with pytest.raises(ValueError, match="folder"):
            directory_sas(
                account="lakeacct",
                filesystem="lake",
                directory=directory,
                write=False,
                start=start,
                expiry=expiry,
                account_key=KEY,
            )


class Recorder:
    """A signer that records its calls and signs nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def __call__(
        self,
        profile: dict[str, Any],
        credential: dict[str, Any],
        directory: str,
        write: bool,
        now: dt.datetime,
    ) -> SignedSas:
        self.calls.append((directory, write))
        expiry = now + dt.timedelta(seconds=int(profile["sas-token-validity-seconds"]))
        return SignedSas(f"sig={len(self.calls)}", expiry)


def test_tokens_are_reused_for_half_their_life_only() -> None:
    clock = [1_900_000_000.0]
    signer = Recorder()
    vendor = SasVendor(clock=lambda: clock[0], signer=signer)
    stored = profile(**{"sas-token-validity-seconds": 1000})
    table = f"{stored['base-location']}/db/t1"
    first = vendor.vend(stored, SHARED, table, write=False)
    assert first.prefix == table
    clock[0] += 499
    assert vendor.vend(stored, SHARED, table, write=False).config == first.config
    vendor.vend(stored, SHARED, table, write=True)  # another permission, another token
    clock[0] += 2
    assert vendor.vend(stored, SHARED, table, write=False).config != first.config
    vendor.vend(stored, {**SHARED, "key": "b3RoZXI="}, table, write=False)  # a new credential
    assert signer.calls == [("db/t1", False), ("db/t1", True), ("db/t1", False), ("db/t1", False)]


def test_a_caller_cannot_change_a_cached_answer() -> None:
    vendor = SasVendor(signer=Recorder())
    stored = profile()
    table = f"{stored['base-location']}/t"
    vendor.vend(stored, SHARED, table, write=False).config["adls.sas-token.x"] = "planted"
    assert "adls.sas-token.x" not in vendor.vend(stored, SHARED, table, write=False).config


@pytest.mark.attack
@pytest.mark.parametrize(
    "location",
    [
        "abfss://lake@lakeacct.dfs.core.windows.net/wh",
        "abfss://lake@lakeacct.dfs.core.windows.net/wh2/t",
        "abfss://lake@lakeacct.dfs.core.windows.net",
        "abfss://other@lakeacct.dfs.core.windows.net/wh/t",
        "abfss://lake@otheracct.dfs.core.windows.net/wh/t",
        "s3://lake/wh/t",
    ],
)
def test_nothing_but_a_table_folder_is_vended_for(location: str) -> None:
    signer = Recorder()
    with pytest.raises(BadRequestError):
        SasVendor(signer=signer).vend(profile(**{"key-prefix": "wh"}), SHARED, location, write=True)
    assert signer.calls == []


def test_vending_must_be_enabled() -> None:
    with pytest.raises(UnsupportedOperationError):
        SasVendor(signer=Recorder()).vend(
            profile(**{"sas-enabled": False}),
            SHARED,
            "abfss://lake@lakeacct.dfs.core.windows.net/t",
            write=False,
        )
