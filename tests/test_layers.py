"""The layer contract has no exceptions (docs/layers.md): `ignore_imports` stays
empty, and no module reaches a fusec module through importlib, where
`lint-imports` cannot see the import."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("analysis", "codegen", "compiler", "dialects", "fuzz", "importers", "passes",
            "reference", "runtime", "scheduling")


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def test_the_layer_contract_ignores_no_import() -> None:
    contracts = _contracts()
    assert contracts
    for contract in contracts:
        assert not contract.get("ignore_imports"), (
            f"{contract['name']}: move what the lower layer needs down instead "
            "(docs/layers.md)")


def _dynamic_imports(tree: ast.AST) -> list[int]:
    """Lines calling `import_module(...)` or `__import__(...)` with anything but
    a literal name of a module outside fusec."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ("import_module", "__import__"):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                and not arg.value.startswith("fusec"):
            continue
        lines.append(node.lineno)
    return lines


def _sites() -> dict[str, list[int]]:
    # the modules of the package itself (`__init__.py`, `command.py`, ...) and of every layer
    files = [*ROOT.glob("*.py"), *(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))]
    found: dict[str, list[int]] = {}
    for path in files:
        lines = _dynamic_imports(ast.parse(path.read_text(), str(path)))
        if lines:
            found[str(path.relative_to(ROOT))] = lines
    return found


def test_no_fusec_module_is_imported_by_name() -> None:
    found = _sites()
    # runtime/arrays.py imports optional third-party modules (torch, cupy) by name
    found.pop("runtime/arrays.py", None)
    assert not found, (
        f"modules imported by name, hidden from lint-imports: {found}; import them in a "
        "function's body instead, or hand the lower layer what it needs (docs/layers.md)")


def test_the_scan_sees_an_import_by_name() -> None:
    code = ("import importlib\n"
            "importlib.import_module('fusec.scheduling.kinds')\n"
            "importlib.import_module('cupy')\n"
            "__import__(name)\n")
    assert _dynamic_imports(ast.parse(code)) == [2, 4]
