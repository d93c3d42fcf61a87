"""Storage: one folder per kind (`file/`, `s3/`, ...), each a `StorageKind` (`kind.py`),
behind one registry (`registry.py`), through which the rest of the catalog reaches them.
`purge.py` decides what a purge may delete, whatever the kind."""

from __future__ import annotations

from icelog.commands.storage.kind import ConsoleForm as ConsoleForm
from icelog.commands.storage.kind import FormField as FormField
from icelog.commands.storage.kind import RemoteSigner as RemoteSigner
from icelog.commands.storage.kind import SignRequest as SignRequest
from icelog.commands.storage.kind import StorageKind as StorageKind
from icelog.commands.storage.kind import StorageLimits as StorageLimits
from icelog.commands.storage.kind import storage_credentials as storage_credentials
from icelog.commands.storage.policy import StoragePolicy as StoragePolicy
from icelog.commands.storage.registry import KINDS as KINDS
from icelog.commands.storage.registry import check_storage_access as check_storage_access
from icelog.commands.storage.registry import clients_need_access as clients_need_access
from icelog.commands.storage.registry import credential_for as credential_for
from icelog.commands.storage.registry import credential_of as credential_of
from icelog.commands.storage.registry import file_io_for as file_io_for
from icelog.commands.storage.registry import kind_for as kind_for
from icelog.commands.storage.registry import kind_named as kind_named
from icelog.commands.storage.registry import storage_root as storage_root
from icelog.commands.storage.registry import validate_storage_profile as validate_storage_profile
