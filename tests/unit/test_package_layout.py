"""The layers are top-level folders installed as one package `icelog` (ADR 0021): each
layer is reached by one name only, or the same event class would exist twice, under two
topics."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("api", "commands", "domain", "projections", "publishers")


def test_each_layer_is_linked_into_the_package() -> None:
    for layer in LAYERS:
        link = ROOT / "icelog" / layer
        assert link.is_symlink(), f"icelog/{layer} should be a link to ../{layer}"
        assert link.resolve() == (ROOT / layer).resolve()


def _bare_layer_imports(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] in LAYERS]
    return found


@pytest.mark.parametrize("folder", [*LAYERS, "tests", "bench", "scripts"])
def test_no_module_imports_a_layer_by_its_bare_name(folder: str) -> None:
    bare = [hit for path in (ROOT / folder).rglob("*.py") for hit in _bare_layer_imports(path)]
    assert bare == [], "import the layers as icelog.<layer>: " + ", ".join(bare)


def test_a_bare_import_is_noticed(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("from domain.table import Table\nimport icelog.domain\n")
    assert _bare_layer_imports(module, tmp_path) == ["probe.py: domain.table"]
