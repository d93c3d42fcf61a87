"""Moved to `s3/vending.py`; this path stays because tests import it here."""

from icelog.commands.storage.s3.vending import *  # noqa: F403
