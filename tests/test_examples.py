"""The bundled examples and the shared full-size models: they parse, verify and
print back identically; each example is a small copy of its model (same ops in
the same order) and runs in the reference interpreter."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.printer import Printer

from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module
from fusec.reference.interpreter import find_function, random_inputs, run_function

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.mlir"))
SHARED_DIR = ROOT.parent / "shared" / "models"
SHARED = sorted(SHARED_DIR.glob("*.mlir")) if SHARED_DIR.is_dir() else []

# Small enough for numba's CUDA simulator.
MAX_EXAMPLE_ELEMENTS = 4096


def load(path: Path) -> ModuleOp:
    module = parse_module(make_context(), path.read_text(), str(path))
    verify_module(module)
    return module


def to_text(module: ModuleOp) -> str:
    buf = io.StringIO()
    Printer(stream=buf).print_op(module)
    return buf.getvalue()


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk()]


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 7


@pytest.mark.parametrize("path", EXAMPLES + SHARED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_parses_verifies_and_round_trips(path: Path) -> None:
    text = to_text(load(path))
    again = parse_module(make_context(), text, f"{path.name} (printed)")
    verify_module(again)
    assert to_text(again) == text


@pytest.mark.skipif(not SHARED, reason="shared/models is not next to the repository")
def test_every_shared_model_has_a_small_example() -> None:
    assert {p.name for p in SHARED} <= {p.name for p in EXAMPLES}


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_example_has_the_structure_of_its_model(path: Path) -> None:
    example = ROOT / "examples" / path.name
    assert op_names(load(example)) == op_names(load(path))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_header_says_what_it_is(path: Path) -> None:
    """One comment line saying what the model is, naming no file outside the
    repository (the full-size models are not part of it)."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("// ") and len(first) > 40
    assert first.endswith("; an example small enough to run in seconds in numba's CUDA simulator")
    assert "shared/" not in first and ".mlir" not in first


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_tensors_are_small(path: Path) -> None:
    for op in load(path).walk():
        for value in (*op.operands, *op.results):
            if isinstance(value.type, TensorType):
                assert np.prod(value.type.get_shape()) <= MAX_EXAMPLE_ELEMENTS, str(value.type)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_in_the_reference_interpreter(path: Path) -> None:
    func = find_function(load(path))
    inputs = random_inputs(func, seed=0)
    outputs = run_function(func, inputs)
    declared = [t for t in func.function_type.outputs.data if isinstance(t, TensorType)]
    assert [o.shape for o in outputs] == [tuple(t.get_shape()) for t in declared]
    for out in outputs:
        assert np.all(np.isfinite(out))
    # float32 evaluation agrees with the float64 oracle to float32 accuracy.
    for lo, hi in zip(run_function(func, inputs, np.float32), outputs, strict=True):
        assert lo.dtype == np.float32
        np.testing.assert_allclose(lo, hi, rtol=1e-3, atol=1e-3 * float(np.abs(hi).max()))
