"""Where warehouses may live, from settings: each kind reads its own part of the policy when
it checks a profile (`StorageKind.normalize`)."""

from __future__ import annotations

from dataclasses import dataclass

from icelog.domain.locations import Location


@dataclass(frozen=True)
class StoragePolicy:
    """`file` warehouses only below one of `file_roots` (ICELOG_FILE_WAREHOUSE_ROOTS), S3
    endpoints only on `s3_endpoint_hosts` (ICELOG_S3_ENDPOINT_HOSTS). Empty: no
    restriction."""

    file_roots: tuple[Location, ...] = ()
    s3_endpoint_hosts: tuple[str, ...] = ()
