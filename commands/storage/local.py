"""Moved to `file/local.py`. This path stays because tests import it here and patch its
MAX_WALK_ENTRIES: the name is bound to the moved module itself (a copy would not see the
patch); the star import tells type checkers what it holds."""

import sys

from icelog.commands.storage.file import local as _moved
from icelog.commands.storage.file.local import *  # noqa: F403

sys.modules[__name__] = _moved
