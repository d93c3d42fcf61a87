"""`icelog clients` alone (api/clients.py `overview`): a client that is not installed says
how to install it, and the overview still comes out whole."""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest

from icelog.api import clients


def test_missing_clients_say_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    def nothing_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    def no_module(name: str) -> object:
        raise ImportError(name)

    monkeypatch.setattr(importlib.metadata, "version", nothing_installed)
    monkeypatch.setattr(importlib, "import_module", no_module)
    lines = clients.overview("http://127.0.0.1:8181/catalog", "default")
    assert lines[0] == 'Iceberg REST catalog: http://127.0.0.1:8181/catalog (warehouse "default")'
    assert "PyIceberg: not installed (pip install 'icelog[clients]')" in lines
    assert (
        "  not installed: snowpark-connect-deps-iceberg==1.0.2 (pip install 'icelog[clients]')"
        in lines
    )
    assert any(line.startswith("DuckDB not installed") for line in lines)


def test_pyiceberg_without_its_core_says_partitioned_writes_need_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    versions = {"pyiceberg": "0.12.0"}

    def version(name: str) -> str:
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    without = clients.overview("http://h:1/catalog", "w")
    said = "\n".join(without)
    assert "PyIceberg 0.12.0 (partitioned writes: no pyiceberg-core: pip install " in said
    versions["pyiceberg-core"] = "0.10.1"
    with_core = clients.overview("http://h:1/catalog", "w")
    assert "PyIceberg 0.12.0 (partitioned writes: pyiceberg-core 0.10.1)" in with_core
