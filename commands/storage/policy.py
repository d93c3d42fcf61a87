"""Where warehouses may live, from settings: each kind reads its own part of the policy when
it checks a profile (`StorageKind.normalize`)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location


@dataclass(frozen=True)
class StoragePolicy:
    """`file` warehouses only below one of `file_roots` (ICELOG_FILE_WAREHOUSE_ROOTS), S3
    endpoints only on `s3_endpoint_hosts` (ICELOG_S3_ENDPOINT_HOSTS). Empty: no
    restriction."""

    file_roots: tuple[Location, ...] = ()
    s3_endpoint_hosts: tuple[str, ...] = ()

    def check_endpoint(self, key: str, url: str | None) -> None:
        """A URL a profile names, which the catalog would call with the warehouse's credential
        (a storage endpoint, a token or STS endpoint): its host (or host:port) must be
        on the operator's list when there is one. One list for every kind: what it guards
        against (a warehouse that sends the server's requests elsewhere) is the same."""
        if url is None or not self.s3_endpoint_hosts:
            return
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        with_port = f"{host}:{parts.port}" if parts.port is not None else host
        if host not in self.s3_endpoint_hosts and with_port not in self.s3_endpoint_hosts:
            raise BadRequestError(
                f"{key} is not an allowed storage endpoint host (ICELOG_S3_ENDPOINT_HOSTS)"
            )
