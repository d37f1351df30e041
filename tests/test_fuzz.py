"""The differential fuzzer (`fusec/fuzz`): its fixed-seed CI slice, the
minimized programs it has found, and the fuzzer's own parts.

The slice runs `SLICE` random programs of seed `SLICE_SEED` fused and unfused
in the simulator against the reference (the first `DEFAULT_SLICE` in the default
set, the rest with the slow set); any failure fails the test with the
program (and names the fixed bug it looks like a return of, `fuzz/triage.py`).
Each file of `fuzz_regressions/` must pass (or, marked `// xfail: REASON`,
fail until it is fixed: strict).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module
from fusec.dialects.nn import NN
from fusec.fuzz.check import check_text, compare, match_outputs, within_spread
from fusec.fuzz.generate import GenConfig, random_graph
from fusec.fuzz.graph import Arg, Graph, Node, TType
from fusec.fuzz.minimize import minimize
from fusec.fuzz.names import function_name, symbol
from fusec.fuzz.run import FuzzOptions, read_header
from fusec.fuzz.triage import KNOWN_ITEMS, known_item

SLICE_SEED = 2026
SLICE = 60
DEFAULT_SLICE = 6  # the rest of the slice runs with the slow set (`-m slow`; CI runs both)
REGRESSIONS = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.mlir"))


def _slice_case(index: int) -> tuple[str, bool]:
    rng = np.random.default_rng([SLICE_SEED, index])
    graph = random_graph(rng, GenConfig())
    return graph.text(), bool(rng.random() < FuzzOptions.edge_rate)


@pytest.mark.parametrize("index", [
    i if i < DEFAULT_SLICE else pytest.param(i, marks=pytest.mark.slow) for i in range(SLICE)])
def test_fuzz_slice(index: int) -> None:
    """Graph `index` of the CI slice matches the reference fused and unfused."""
    text, edges = _slice_case(index)
    outcome = check_text(text, index, edges)
    if outcome.failed:
        item = known_item(text, outcome, index, edges)
        like = f" (it looks like {item} again: {KNOWN_ITEMS[item]})" if item else ""
        pytest.fail(f"{outcome}{like}\n{text}")


def _regression_params() -> list[object]:
    params: list[object] = []
    for path in REGRESSIONS:
        _, _, why = read_header(path.read_text(encoding="utf-8"))
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        params.append(pytest.param(path, marks=marks, id=path.stem))
    return params


@pytest.mark.parametrize("path", _regression_params())
def test_fuzz_regression(path: Path) -> None:
    """A minimized program the fuzzer found: compiled fused and unfused, it
    matches the reference in the simulator."""
    text = path.read_text(encoding="utf-8")
    seed, edges, _ = read_header(text)
    outcome = check_text(text, seed, edges)
    assert not outcome.failed, f"{outcome}\n{text}"


def test_generator_covers_every_op_and_verifies() -> None:
    """200 generated programs parse and verify, and use every `nn` op."""
    seen: set[str] = set()
    for i in range(200):
        graph = random_graph(np.random.default_rng([1, i]))
        verify_module(parse_module(make_context(), graph.text(), f"g{i}.mlir"))
        seen.update(n.op for n in graph.nodes)
    assert seen == {op.name for op in NN.operations}


@pytest.mark.parametrize("name", ['a"b\\c', "x\ny\tz", "λ中😀 é", "9start", "a" * 70])
def test_odd_function_names_parse_back(name: str) -> None:
    """Names needing quotes and escapes survive printing and fusec's parser."""
    text = f"func.func {symbol(name)}(%x: tensor<2xf32>) -> tensor<2xf32> {{\n" \
           "  func.return %x : tensor<2xf32>\n}\n"
    func = next(iter(parse_module(make_context(), text, "n.mlir").ops))
    assert func.sym_name.data == name  # type: ignore[attr-defined]


def test_random_function_names_include_long_ones() -> None:
    """Names over 40 characters are drawn (kernel names derive from them)."""
    rng = np.random.default_rng(0)
    assert max(len(function_name(rng)) for _ in range(50)) > 40


def test_compare_requires_nan_and_inf_in_the_same_places() -> None:
    """NaN and inf positions are compared exactly, finite values with tolerance."""
    want = np.array([1.0, np.nan, np.inf, 2.0])
    assert compare(want.astype(np.float32), want) == ""
    assert "NaN" in compare(np.array([1, 0, np.inf, 2], np.float32), want)
    assert "inf" in compare(np.array([1, np.nan, -np.inf, 2], np.float32), want)
    assert "err" in compare(np.array([1, np.nan, np.inf, 2.1], np.float32), want)
    assert compare(np.array([1, np.nan, np.inf, 2.0001], np.float32), want) == ""
    # f32 outputs computed from f16 values are held to f16's tolerance.
    assert compare(np.array([1.001], np.float32), np.array([1.0]))
    assert compare(np.array([1.001], np.float32), np.array([1.0]), min_tolerance=1e-2) == ""


def test_an_element_between_references_that_disagree_matches() -> None:
    """Where the references disagree (an ill-conditioned step), an element
    matching none of them is accepted within their spread, widened by it;
    a value past that, or one wrong where they agree, is still a mismatch."""
    f64 = np.array([1.0, -0.898, 2.0])
    rounded = np.array([1.0, -0.955, 2.0])
    refs = [[f64], [rounded]]
    kernel = np.array([1.0, -0.846, 2.0], np.float16)  # 0.052 from the nearest
    assert compare(kernel, f64) and compare(kernel, rounded)
    assert match_outputs([kernel], refs, "", "fused").status == "ok"
    far = np.array([1.0, -0.70, 2.0], np.float16)
    assert match_outputs([far], refs, "", "fused").status == "mismatch"
    wrong = np.array([1.1, -0.9, 2.0], np.float16)
    assert match_outputs([wrong], refs, "", "fused").status == "mismatch"


def test_nan_is_accepted_only_where_a_finite_sum_overflows() -> None:
    """A NaN where float64 is finite but a reference passes the type's range
    (inf - inf in another order) matches; a NaN where the answer is an input's
    inf, or where every reference is finite and in range, does not."""
    got = np.array([np.nan, 1.0], np.float32)
    assert within_spread(got, [np.array([-6.5e38, 1.0]), np.array([-np.inf, 1.0])])
    assert within_spread(got, [np.array([6.8e37, 1.0]), np.array([np.inf, 1.0])])
    assert not within_spread(got, [np.array([np.inf, 1.0]), np.array([np.inf, 1.0])])
    assert not within_spread(got, [np.array([6.8e37, 1.0]), np.array([6.8e37, 1.0])])
    assert not within_spread(np.array([np.inf, 1.0], np.float32),
                             [np.array([-np.inf, 1.0]), np.array([-np.inf, 1.0])])


def test_minimize_keeps_the_failure_and_drops_the_rest() -> None:
    """Greedy minimization cuts every op the 'failure' (an nn.log) does not need."""
    t = TType((4,), "f32")
    graph = Graph("a_long_function_name", [Arg("x", t)], [
        Node("e", "nn.exp", ("x",), t, same_type=True),
        Node("l", "nn.log", ("e",), t, same_type=True),
        Node("s", "nn.add", ("l", "x"), t),
        Node("n", "nn.neg", ("x",), t, same_type=True),
    ], ["s", "n"])
    small = minimize(graph, lambda g: any(n.op == "nn.log" for n in g.nodes))
    assert [n.op for n in small.nodes] == ["nn.log"]
    assert small.func_name == "f" and len(small.outputs) == 1
