"""ONNX's node tests through the whole compiler: `fusec import`,
`fusec.compile` (fusion on) and the generated kernels, on the GPU or, without
one, in numba's CUDA simulator, against ONNX's expected outputs.

Every case of `test_onnx_node` that imports is compiled and run here (414 of
584; about 40 s of CPU in the simulator, so all of them run by default). Cases
the importer refuses are skipped: `test_onnx_node` checks that they are
refused clearly. Cases that fail because of known bugs are `xfail` with the
reason, to be un-marked when they pass.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from test_onnx_node import _compare, collect_cases, outcome_of

import fusec
from fusec.importers.onnx import import_model

# Cases that fail because of known bugs fixed elsewhere; un-xfail when they pass.
NAME_COLLISION = ("kernel names collide: the function name is cut to 40 characters and two "
                  "kernels get one name (issue 10, item 1)")
KNOWN_FAILURES: dict[str, str] = {
    **{f"test_layer_normalization_{case}": NAME_COLLISION for case in (
        "2d_axis_negative_1", "2d_axis_negative_2", "3d_axis0_epsilon", "3d_axis1_epsilon",
        "3d_axis2_epsilon", "3d_axis_negative_1_epsilon", "3d_axis_negative_2_epsilon",
        "3d_axis_negative_3_epsilon", "4d_axis_negative_1", "4d_axis_negative_2",
        "4d_axis_negative_3", "4d_axis_negative_4")},
    "test_reduce_sum_empty_set_non_reduced_axis_zero":
        "zero-size dimensions: register-budget divides by zero (issue 10, item 8)",
}


def _compiled_outputs(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """ONNX's expected outputs and those of the compiled kernels."""
    case = collect_cases()[name]
    outcome = outcome_of(name)
    if outcome.status == "refused":
        pytest.skip("refused by the importer (test_onnx_node checks the refusal)")
    assert outcome.status == "pass", outcome.detail
    result = import_model(case.model, bind={k: case.feeds[k] for k in outcome.bound})
    model = fusec.compile(result.text, device="auto")
    out = model(*[case.feeds[k] for k in result.inputs])
    return case.expected, list(out) if isinstance(out, tuple) else [out]


def _params(names: list[str]) -> list[object]:
    return [pytest.param(n, marks=[pytest.mark.xfail(reason=KNOWN_FAILURES[n])]
                         if n in KNOWN_FAILURES else [])
            for n in names]


@pytest.mark.parametrize("name", _params(sorted(collect_cases())))
def test_node_case_compiled(name: str) -> None:
    """The compiled kernels reproduce ONNX's expected outputs."""
    expected, got = _compiled_outputs(name)
    assert len(got) == len(expected)
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        problem = _compare(want, np.asarray(have))
        assert not problem, f"output #{i}: {problem}"
