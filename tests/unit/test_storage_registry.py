"""The storage registry: every kind is found by its profile's `type` and describes itself
completely (models that take `storage-layout`, a console form whose inputs its models
take), and nothing outside `commands/storage/` asks which kind a warehouse has."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from icelog.commands.storage import (
    KINDS,
    clients_need_access,
    file_io_for,
    kind_for,
    storage_root,
    validate_storage_profile,
)
from icelog.commands.storage.shapes import ProfileBody, StorageBody
from icelog.domain.errors import BadRequestError

ROOT = Path(__file__).resolve().parents[2]
# The layers outside the storage package: none of them may test a profile's type (or a
# location's scheme) against a kind's name.
SCANNED = ("api", "commands", "domain", "projections", "publishers")
STORAGE = ROOT / "commands" / "storage"
SUFFIXES = {".py", ".html", ".js"}


def _kind_tests(text: str, names: list[str]) -> list[str]:
    """`x == "s3"`, `"file" != x`, `x in ("file", "s3")`: each a kind test."""
    kind = "|".join(re.escape(name) for name in names)
    quoted = rf"""["'](?:{kind})["']"""
    patterns = [
        rf"[=!]==?\s*{quoted}",
        rf"{quoted}\s*[=!]==?",
        rf"\bin\s*[\(\[\{{][^\)\]\}}]*{quoted}",
    ]
    return [m.group(0) for p in patterns for m in re.finditer(p, text)]


def test_the_detector_sees_the_usual_spellings() -> None:
    names = ["file", "s3"]
    for offender in [
        'if profile.get("type") == "s3":',
        "if profile['type'] != 'file':",
        'if "s3" == kind:',
        'if kind not in ("file", "s3"):',
        "{% if values['storage-type'] != 's3' %}checked{% endif %}",
        'var kind = chosen === "file";',
    ]:
        assert _kind_tests(offender, names), offender
    for fine in ['{"type": "file", "base-location": x}', 'type: Literal["s3"]', 'name = "s3"']:
        assert not _kind_tests(fine, names), fine


def test_no_storage_kind_test_outside_the_storage_package() -> None:
    names = [kind.name for kind in KINDS]
    found = []
    for layer in SCANNED:
        for path in sorted((ROOT / layer).rglob("*")):
            if path.suffix not in SUFFIXES or STORAGE in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for hit in _kind_tests(line, names):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {hit}")
    assert found == [], (
        "ask the storage kind (commands/storage/registry.py) instead of testing its name:\n"
        + "\n".join(found)
    )


# -- every kind describes itself completely ---------------------------------------------------
def _literal(model: type[BaseModel], field: str) -> tuple[Any, ...]:
    return typing.get_args(model.model_fields[field].annotation)


def _names(model: type[BaseModel]) -> set[str]:
    """The JSON names a model takes (aliases, and alternative spellings)."""
    found: set[str] = set()
    for name, info in model.model_fields.items():
        found.add(info.alias or name)
        choices = getattr(info.validation_alias, "choices", ())
        found |= {choice for choice in choices if isinstance(choice, str)}
    return found


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_each_kind_is_found_by_its_name_and_describes_itself(kind: Any) -> None:
    assert kind_for({"type": kind.name}) is kind
    assert issubclass(kind.profile_model, ProfileBody), "every profile takes storage-layout"
    assert _literal(kind.profile_model, "type") == (kind.name,)
    assert "storage-layout" in _names(kind.profile_model)
    credential = kind.credential_model
    if credential is not None:
        assert issubclass(credential, StorageBody)
    # The console sends only what the management models take.
    form = kind.form
    keys = [field.key for field in form.fields]
    assert len(keys) == len(set(keys))
    for field in form.fields:
        if field.part == "profile":
            assert field.key in _names(kind.profile_model), field.key
        else:
            assert credential is not None and field.key in _names(credential), field.key
        assert field.widget != "select" or field.choices
    if form.credential:
        assert credential is not None and set(form.credential) <= _names(credential)
        assert form.credential["type"] in _literal(credential, "type")


def test_kind_names_are_unique() -> None:
    names = [kind.name for kind in KINDS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("kind", [None, "hdfs", "", ["s3"], {"s3": 1}, "S3"])
def test_a_type_no_kind_has_is_a_400_everywhere(kind: Any) -> None:
    profile = {"type": kind, "base-location": "file:///srv/lake"}
    for call in (
        lambda: kind_for(profile),
        lambda: file_io_for(profile),
        lambda: storage_root(profile),
        lambda: validate_storage_profile(profile, check_access=False),
    ):
        with pytest.raises(BadRequestError) as refused:
            call()
        assert refused.value.status == 400
        assert "Unsupported storage profile type" in refused.value.message
        assert "file, s3" in refused.value.message
    with pytest.raises(BadRequestError, match="must be an object"):
        validate_storage_profile(["file"], check_access=False)


def test_only_kinds_whose_clients_need_something_get_the_slow_path() -> None:
    file, _ = validate_storage_profile(
        {"type": "file", "base-location": "file:///srv/lake"}, check_access=False
    )
    s3, _ = validate_storage_profile(
        {"type": "s3", "bucket": "lake", "region": "eu-west-1", "remote-signing-enabled": False},
        {"type": "s3", "access-key-id": "k", "secret-access-key": "s"},
        check_access=False,
    )
    assert not clients_need_access(file)
    assert clients_need_access(s3)  # where the bucket is, even without signing or vending


def test_an_s3_credential_is_kept_only_for_the_same_store() -> None:
    s3 = kind_for({"type": "s3"})
    old = {"endpoint": "http://a", "bucket": "b", "region": "r", "sts-endpoint": None}
    assert s3.keeps_credential(old, {**old, "sts-token-validity-seconds": 7200})
    for key, value in [
        ("endpoint", "http://evil"),
        ("bucket", "other"),
        ("region", "eu-west-1"),
        ("sts-endpoint", "http://evil"),
    ]:
        assert not s3.keeps_credential(old, {**old, key: value}), key
    assert not kind_for({"type": "file"}).keeps_credential({}, {})
