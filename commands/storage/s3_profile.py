"""Moved to `s3/profile.py`; this path stays because a conformance test reads the field
sets and the bucket rule here."""

from icelog.commands.storage.profile_fields import DERIVED_FIELDS
from icelog.commands.storage.s3.profile import *  # noqa: F403
from icelog.commands.storage.s3.profile import _BUCKET as _BUCKET  # noqa: PLC0414
from icelog.commands.storage.s3.profile import _FIELDS as _FIELDS  # noqa: PLC0414

# The fields the server writes into a stored profile (now shared by every kind).
_DERIVED = DERIVED_FIELDS
