"""Moved to `s3/profile.py`; this path stays because a conformance test reads the field
sets and the bucket rule here."""

from icelog.commands.storage.s3.profile import *  # noqa: F403
from icelog.commands.storage.s3.profile import _BUCKET as _BUCKET  # noqa: PLC0414
from icelog.commands.storage.s3.profile import _DERIVED as _DERIVED  # noqa: PLC0414
from icelog.commands.storage.s3.profile import _FIELDS as _FIELDS  # noqa: PLC0414
