"""docs/settings.md is the table of settings as scripts/settings_doc.py renders it, and the
table sets every field of the settings once."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from icelog.api.settings import AuthSettings, PublishSettings, Settings
from icelog.api.settings_table import SECTIONS, SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "settings_doc", ROOT / "scripts" / "settings_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["settings_doc"] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == _script().render(), "run .venv/bin/python scripts/settings_doc.py"


def test_each_field_is_set_by_one_entry() -> None:
    set_by_table = [field for setting in SETTINGS for field in setting.fields]
    assert len(set_by_table) == len(set(set_by_table))
    sized = {"pg_pool_size", "pg_max_overflow", "pg_read_connections"}  # from the pool request
    own = (
        {f.name for f in dataclasses.fields(Settings)} - sized - {"publish", "auth", "pool_request"}
    )
    assert set(set_by_table) == (
        own
        | {f"publish.{f.name}" for f in dataclasses.fields(PublishSettings)}
        | {f"auth.{f.name}" for f in dataclasses.fields(AuthSettings)}
        | {"pool.max_connections", "pool.pool_size", "pool.max_overflow", "pool.read_connections"}
    )


def test_every_entry_is_documented_in_a_section() -> None:
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)
    for setting in SETTINGS:
        assert setting.section in SECTIONS and setting.doc, setting.name


def test_defaults_parse() -> None:
    settings = Settings.from_env({})
    assert settings.port == 8181 and settings.publish.nats_stream == "ICELOG"
