"""The layering of docs/architecture.md is the code's: import-linter checks the contracts in
pyproject.toml, and the module graph has no cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), str(config), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_are_kept():
    ran = lint_imports(ROOT / "pyproject.toml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3 kept, 0 broken" in ran.stdout


def test_a_contract_the_code_breaks_is_reported(tmp_path):
    """The check reads the code: the layers upside down fail, naming an import."""
    config = tmp_path / "upside-down.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "nbspam"\n\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "mail above the command line"\ntype = "layers"\n'
        'layers = ["nbspam.mail", "nbspam.cli"]\n'
    )
    ran = lint_imports(config)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "0 kept, 1 broken" in ran.stdout
    assert "nbspam.cli." in ran.stdout and "-> nbspam.mail." in ran.stdout


def cycles(package: str) -> list[tuple[str, str]]:
    """Each import a -> b of ``package`` where b also leads back to a: an import cycle.
    Imports inside functions and under TYPE_CHECKING count."""
    graph = grimp.build_graph(package, cache_dir=None)
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if graph.chain_exists(importer=imported, imported=importer):
                found.append((importer, imported))
    return found


def test_no_module_imports_one_that_imports_it_back():
    assert cycles("nbspam") == []


def test_a_cycle_is_found(tmp_path, monkeypatch):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n")
    (package / "b.py").write_text("from . import c\n")
    (package / "c.py").write_text("from .a import f\n")
    (package / "d.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles("cyclic") == [
        ("cyclic.a", "cyclic.b"),
        ("cyclic.b", "cyclic.c"),
        ("cyclic.c", "cyclic.a"),
    ]


def test_package_inits_import_nothing():
    """Importing nbspam.mail.headers must not import the rest of nbspam.mail: each
    package's __init__.py is its docstring alone."""
    inits = sorted((ROOT / "nbspam").glob("*/__init__.py"))
    assert {p.parent.name for p in inits} >= {"cli", "mail", "models", "service", "store"}
    for init in inits:
        body = ast.parse(init.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), init
        assert isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)


def test_no_command_asks_the_kind_of_a_model_or_of_its_data():
    """The commands call the library, which tells a model of messages from a table model
    (`store.kinds`) and messages from a typed table (`api`): no name of either choice
    appears in cli/commands.py."""
    tree = ast.parse((ROOT / "nbspam" / "cli" / "commands.py").read_text())
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            used.update((node.module or "").split("."))
            used.update(alias.name for alias in node.names)
    asking = {
        "is_table_model",
        "kind",
        "kind_of",
        "typed_table",
        "typed_table_settings",
        "_typed_table",
        "TableModel",
        "table_model",
        "tablefile",
        "table_training",
        "table_evaluation",
    }
    assert sorted(asking & used) == []
