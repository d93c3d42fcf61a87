"""ADLS Gen2 storage (`abfss://<filesystem>@<account>.<host>/...` warehouses) over the Blob
API: `KIND` (profiles `type: adls`, credentials `type: az`), registered in
`commands/storage/registry.py`; its management models (`models.py`) and console form
(`form.py`) are the kind's class attributes."""

from __future__ import annotations

from icelog.commands.storage.adls.kind import AdlsKind

KIND = AdlsKind()
