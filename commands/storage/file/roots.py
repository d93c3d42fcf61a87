"""Where a `file` warehouse really is: its directory as the system resolves it (links
followed), for telling whether two warehouses overlap and whether one lies below an allowed
root (ICELOG_FILE_WAREHOUSE_ROOTS)."""

from __future__ import annotations

import os

from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location


def resolved(location: Location) -> Location:
    """A `file` location as the system resolves it (links followed)."""
    return Location.parse(
        os.path.realpath(location.path), "storage-profile.base-location", encoded_separators=True
    )


def check_below_allowed_root(base: Location, roots: tuple[Location, ...]) -> None:
    """Both as written and as the system resolves it (a link planted in an allowed place
    must not lead out of it). No roots: no restriction."""
    if not roots:
        return
    real = resolved(base)
    allowed = [(root, resolved(root)) for root in roots]
    if not any(root.contains(base) and real_root.contains(real) for root, real_root in allowed):
        raise BadRequestError(
            f"storage-profile.base-location {base} is not below an allowed warehouse root "
            "(ICELOG_FILE_WAREHOUSE_ROOTS)"
        )
