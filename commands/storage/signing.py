"""Moved to `s3/signing.py`; this path stays because tests import it here."""

from icelog.commands.storage.s3.signing import *  # noqa: F403
