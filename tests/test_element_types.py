"""The one element-type table: its rows, and that no second table appears."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from fusec.dialects import element_types
from fusec.dialects.element_types import BY_NAME, element, of_host_dtype, tolerance_of
from fusec.reference.ops import round_to_bf16

ROOT = Path(element_types.__file__).resolve().parent.parent
TABLE = Path(element_types.__file__).resolve()
# Keys that give a dict literal away as a table of element-type facts.
TYPE_KEYS = frozenset({"f16", "bf16", "f32", "f64", "float16", "bfloat16", "float32", "float64"})


def _tables(path: Path) -> list[int]:
    """Lines of dict literals in `path` keyed by an element type name."""
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value in TYPE_KEYS for k in node.keys)]


def test_no_second_element_type_table() -> None:
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted(ROOT.rglob("*.py"))
             if p.resolve() != TABLE and "tests" not in p.relative_to(ROOT).parts
             and ".venv" not in p.parts for line in _tables(p)]
    assert found == [], f"element-type facts belong in dialects/element_types.py: {found}"


def test_the_scan_finds_a_table(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text('W = 1\nWIDTHS = {"f16": 2, "f32": 4}\n')
    assert _tables(sample) == [2]


def test_rows() -> None:
    assert [element(n).width for n in ("f64", "f32", "f16", "bf16", "i1")] == [8, 4, 2, 2, 1]
    assert element("bf16").device_dtype == "uint16" and element("bf16").host_dtype == "float32"
    assert element("f16").unit_roundoff == np.finfo(np.float16).eps / 2
    assert element("f32").unit_roundoff == np.finfo(np.float32).eps / 2
    assert element("bf16").unit_roundoff == 2.0**-8
    assert of_host_dtype("float32") is BY_NAME["f32"]
    assert of_host_dtype("bfloat16") is BY_NAME["bf16"]
    assert tolerance_of("int32") == tolerance_of("float32") == 5e-4
    # Every half row is computed in f32 and converted on load and store.
    assert all(e.compute_type == "float32" and e.widen and e.narrow
               for e in element_types.ELEMENT_TYPES if e.is_half)


def test_bf16_unit_roundoff_bounds_its_rounding() -> None:
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    rel = np.abs(round_to_bf16(x) - x) / np.abs(x)
    assert rel.max() <= element("bf16").unit_roundoff
