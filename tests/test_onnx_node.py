"""ONNX's own node tests, through `fusec import` and the reference interpreter.

The onnx package ships a generator per op (`onnx.backend.test.case.node.<op>`):
each `export*` method builds a one-node model and calls `expect(node, inputs,
outputs, name)`. Here `expect` is replaced by a recorder while the generators
of the supported ops run; each recorded case is built into a model, imported,
parsed and verified, run by `fusec.reference.interpreter.run_module` and compared
with ONNX's expected outputs. For ops ONNX defines by a function, the function
body (`_expanded`) is a case too; each newer case is also tried at opset 13.

Every case must either pass or be refused with a clear `OnnxImportError`
(never a crash, never a wrong number); the per-op pass counts must not drop
below those documented in docs/onnx.md. Inputs that must be known at import
time (a Reshape's shape, Slice's starts) are graph inputs in these tests;
they are bound as constants (`import_model(..., bind=...)`).

`python tests/test_onnx_node.py` prints the per-op table of docs/onnx.md.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from fusec.importers.onnx import NeedsConstantError, OnnxImportError, import_model  # noqa: E402
from fusec.reference.interpreter import run_module  # noqa: E402

# ONNX op type -> the generator module of onnx.backend.test.case.node.
GENERATORS: dict[str, str] = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Neg": "neg",
    "Abs": "abs", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal",
    "Tanh": "tanh", "Erf": "erf", "Sin": "sin", "Cos": "cos", "Sigmoid": "sigmoid",
    "Relu": "relu", "Gelu": "gelu",
    "Clip": "clip", "Softmax": "softmax", "LogSoftmax": "logsoftmax",
    "LayerNormalization": "layernormalization", "BatchNormalization": "batch_normalization",
    "ReduceSum": "reducesum", "ReduceMean": "reducemean", "ReduceMax": "reducemax",
    "ReduceMin": "reducemin", "MatMul": "matmul", "Gemm": "gemm", "Conv": "conv",
    "MaxPool": "maxpool", "AveragePool": "averagepool", "GlobalAveragePool": "globalaveragepool",
    "Transpose": "transpose", "Reshape": "reshape", "Flatten": "flatten", "Squeeze": "squeeze",
    "Unsqueeze": "unsqueeze", "Expand": "expand", "Concat": "concat", "Slice": "slice",
    "Split": "split", "Gather": "gather", "Where": "where", "Equal": "equal", "Less": "less",
    "Greater": "greater", "Cast": "cast", "Constant": "constant",
    "ConstantOfShape": "constantofshape", "Identity": "identity", "Trilu": "trilu",
    "Shape": "shape", "Size": "size", "Max": "max", "Min": "min",
    "LessOrEqual": "less_or_equal", "GreaterOrEqual": "greater_or_equal",
    "GlobalMaxPool": "globalmaxpool", "Dropout": "dropout",
    "IsNaN": "isnan", "IsInf": "isinf", "GatherND": "gathernd",
}

# Per-op pass counts documented in docs/onnx.md; a drop is a regression.
EXPECTED_PASSES: dict[str, int] = {
    "Abs": 1, "Add": 2, "AveragePool": 13, "BatchNormalization": 2, "Cast": 8, "Clip": 9,
    "Clip (expanded)": 9, "Concat": 12, "Constant": 1, "ConstantOfShape": 3, "Conv": 6,
    "Cos": 2, "Div": 3, "Dropout": 8, "Equal": 2, "Erf": 1, "Exp": 2, "Expand": 2, "Flatten": 9,
    "Gather": 4, "GatherND": 3, "Gelu": 4, "Gelu (expanded)": 4, "Gemm": 11, "GlobalAveragePool": 2,
    "GlobalMaxPool": 2, "Greater": 2, "GreaterOrEqual": 2, "GreaterOrEqual (expanded)": 2,
    "Identity": 1, "IsInf": 4, "IsNaN": 2, "LayerNormalization": 19,
    "LayerNormalization (expanded)": 38, "Less": 2,
    "LessOrEqual": 2, "LessOrEqual (expanded)": 2, "Log": 2, "LogSoftmax": 7,
    "LogSoftmax (expanded)": 14, "MatMul": 7, "Max": 8, "MaxPool": 11, "Min": 8, "Mul": 3,
    "Neg": 2, "Pow": 6, "Reciprocal": 2, "ReduceMax": 11, "ReduceMean": 8, "ReduceMin": 10,
    "ReduceSum": 12, "Relu": 1, "Relu (expanded)": 1, "Reshape": 10, "Shape": 11, "Sigmoid": 2,
    "Sin": 2, "Size": 2, "Slice": 8, "Softmax": 7, "Softmax (expanded)": 14, "Split": 16,
    "Sqrt": 2, "Squeeze": 2, "Sub": 3, "Tanh": 2, "Transpose": 7, "Trilu": 18, "Unsqueeze": 7,
    "Where": 2,
}


@dataclass
class Case:
    """One recorded `expect(...)` call."""

    name: str
    op_type: str
    model: Any
    feeds: dict[str, Any]
    expected: list[Any]


@dataclass
class Outcome:
    """`pass`, `refused` (a clear OnnxImportError) or `fail`, with details."""

    status: str
    detail: str = ""
    bound: list[str] = field(default_factory=list)


@cache
def collect_cases() -> dict[str, Case]:
    """Run the generators of the supported ops with `expect` recorded."""
    import onnx.backend.test.case.node as package

    recorded: list[tuple[Any, ...]] = []

    def record(node: Any, inputs: Any, outputs: Any, name: str, **kwargs: Any) -> None:
        recorded.append((node, inputs, outputs, name, kwargs))

    original = package.expect
    package.expect = record  # the generators import `expect` from the package
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # generators overflow on purpose (cast tests)
            for module in sorted(set(GENERATORS.values())):
                _run_generator(Path(package.__file__).parent / f"{module}.py", module)
    finally:
        package.expect = original
    cases = [c for r in recorded if r[0].op_type in GENERATORS for c in _build_cases(package, *r)]
    return {c.name: c for c in cases}


def _run_generator(path: Path, module: str) -> None:
    # A private module name re-executes the file (and so its exports) even if
    # onnx's own copy was imported before.
    spec = importlib.util.spec_from_file_location(f"_fusec_onnx_node_{module}", path)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _build_cases(package: Any, node: Any, inputs: Any, outputs: Any, name: str,
                 kwargs: dict[str, Any]) -> list[Case]:
    """The models `expect` would have built (onnx's own helpers): the node
    alone and, for ops defined by a function, the `_expanded` function body."""
    in_names = [n for n in node.input if n]
    out_names = [n for n in node.output if n]
    in_types = kwargs.pop("input_type_protos", [None] * len(inputs))
    out_types = kwargs.pop("output_type_protos", [None] * len(outputs))
    ins = [package._extract_value_info(a, n, t)
           for a, n, t in zip(inputs, in_names, in_types, strict=False)]
    outs = [package._extract_value_info(a, n, t)
            for a, n, t in zip(outputs, out_names, out_types, strict=False)]
    if "opset_imports" not in kwargs:
        version = onnx.defs.get_schema(node.op_type, domain=node.domain).since_version
        kwargs["opset_imports"] = [onnx.helper.make_operatorsetid(node.domain, version)]
    kwargs["producer_name"] = "backend-test"
    feeds = {n: _as_array(v) for n, v in zip(in_names, inputs, strict=False)}
    expected = [_as_array(v) for v in outputs]
    graph = onnx.helper.make_graph([node], name, ins, outs)
    cases = [Case(name, node.op_type, package._make_test_model_gen_version(graph, **kwargs),
                  feeds, expected)]
    for body, opsets, label in _function_bodies(package, node, ins, name,
                                                kwargs["opset_imports"]):
        graph = onnx.helper.make_graph(body, label, ins, outs)
        model = package._make_test_model_gen_version(
            graph, **{**kwargs, "opset_imports": list(opsets)})
        cases.append(Case(label, node.op_type + " (expanded)", model, feeds, expected))
    return cases


def _function_bodies(package: Any, node: Any, ins: list[Any], name: str,
                     opsets: list[Any]) -> list[tuple[list[Any], Any, str]]:
    """The op's function bodies as (nodes, opsets, case name), named as onnx
    names them (`_expanded`, `_expanded_ver18`); none for primitive ops."""
    present = iter(ins)
    types = [next(present).type if n else onnx.TypeProto() for n in node.input]
    # A copy: the helper adds the schema's default attributes to the node.
    bodies, since = package.function_testcase_helper(copy.deepcopy(node), types, name,
                                                     opset_imports=opsets)
    named = []
    for body, body_opsets in bodies:
        version = next((o.version for o in body_opsets if o.domain in ("", "ai.onnx")), since)
        suffix = "" if version == since else f"_ver{version}"
        named.append((body, body_opsets, f"{name}_expanded{suffix}"))
    return named


def _as_array(value: Any) -> Any:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    # Sequences and optionals stay lists or None; the importer refuses them.
    return value if value is None or isinstance(value, list) else np.asarray(value)


# Tolerances per expected dtype: the reference interpreter computes in float64,
# ONNX's expected outputs were computed in the output's own type.
TOLERANCE: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-3),
    "float32": (1e-3, 1e-6),
    "float64": (1e-7, 1e-12),
}


def run_case(case: Case) -> Outcome:
    """Import (binding shape-like inputs on demand), run, compare."""
    bind: dict[str, np.ndarray] = {}
    while True:
        try:
            result = import_model(case.model, bind=bind, filename=f"{case.name}.mlir")
            break
        except NeedsConstantError as err:
            if err.graph_input is None or err.graph_input in bind:
                return Outcome("refused", err.message)
            bind[err.graph_input] = case.feeds[err.graph_input]
        except OnnxImportError as err:
            return Outcome("refused", err.message, list(bind))
    inputs = {arg: case.feeds[name] for name, arg in result.inputs.items()}
    got = run_module(result.module, inputs)
    for i, (want, have) in enumerate(zip(case.expected, got, strict=True)):
        problem = _compare(want, np.asarray(have))
        if problem:
            return Outcome("fail", f"output #{i}: {problem}", list(bind))
    return Outcome("pass", bound=list(bind))


@cache
def outcome_of(name: str) -> Outcome:
    """`run_case` of a collected case, computed once per session."""
    return run_case(collect_cases()[name])


def _compare(want: np.ndarray, have: np.ndarray) -> str:
    if want.shape != have.shape:
        return f"shape {have.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        if have.dtype.kind not in "biu" or not np.array_equal(want, have):
            return f"values differ: {have!r} vs {want!r}"
        return ""
    rtol, atol = TOLERANCE.get(want.dtype.name, (1e-3, 1e-6))
    if not np.allclose(have.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                       equal_nan=True):
        err = np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)))
        return f"max abs error {err:.3g} (rtol {rtol}, atol {atol})"
    return ""


# --- the tests --------------------------------------------------------------------------


def _case_names() -> list[str]:
    return sorted(collect_cases())


@pytest.mark.parametrize("name", _case_names())
def test_node_case(name: str) -> None:
    """Each case passes or is refused with a clear error naming the node."""
    outcome = outcome_of(name)
    if outcome.status == "refused":
        assert outcome.detail.startswith(("node ", "input ", "dynamic shapes")), outcome.detail
        return
    assert outcome.status == "pass", outcome.detail


def test_pass_counts_do_not_drop() -> None:
    """The documented per-op pass counts still hold."""
    counts = Counter(c.op_type for n, c in collect_cases().items()
                     if outcome_of(n).status == "pass")
    low = {op: (counts[op], n) for op, n in EXPECTED_PASSES.items() if counts[op] < n}
    assert not low, f"pass counts dropped (now, documented): {low}"


def _above_opset13() -> list[str]:
    return sorted(n for n, c in collect_cases().items()
                  if "expanded" not in c.op_type and _opset(c.model) > 13)


def _opset(model: Any) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


@pytest.mark.parametrize("name", _above_opset13())
def test_node_case_at_opset13(name: str) -> None:
    """The same case at opset 13, where onnx's version converter can write it:
    the older forms (attributes instead of inputs) import as well."""
    from onnx import version_converter

    case = collect_cases()[name]
    try:
        model = version_converter.convert_version(case.model, 13)
    except Exception:  # the converter lacks adapters for many ops; nothing to test then
        pytest.skip("onnx's version converter cannot write this case at opset 13")
    outcome = run_case(Case(name, case.op_type, model, case.feeds, case.expected))
    assert outcome.status in ("pass", "refused"), outcome.detail
    if outcome_of(name).status == "pass":
        assert outcome.status == "pass", outcome.detail


def _table() -> str:
    """Markdown table: op, cases, passed, refused (with the reasons)."""
    rows: dict[str, list[tuple[str, Outcome]]] = {}
    for name, case in collect_cases().items():
        rows.setdefault(case.op_type, []).append((name, outcome_of(name)))
    lines = ["| op | cases | pass | not passing (reason) |", "|---|---|---|---|"]
    for op in sorted(rows):
        results = rows[op]
        passed = sum(o.status == "pass" for _, o in results)
        other = "; ".join(f"`{n}`: {o.status}: {o.detail}" for n, o in results
                          if o.status != "pass")
        lines.append(f"| {op} | {len(results)} | {passed} | {other} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(_table() + "\n")
