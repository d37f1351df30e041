"""ONNX's node tests through the whole compiler: `fusec import`,
`fusec.compile` (fusion on) and the generated kernels, on the GPU or, without
one, in numba's CUDA simulator, against ONNX's expected outputs.

Every case of `test_onnx_node` that imports is compiled and run here (416 of
584; about 40 s of CPU in the simulator, so all of them run by default). Cases
the importer refuses are skipped: `test_onnx_node` checks that they are
refused clearly. Every case that imports passes (the kernel-name collisions
and zero-size crashes that once failed 13 of them are fixed).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from sweep import sampled
from test_onnx_node import _compare, collect_cases, outcome_of

import fusec
from fusec.importers.onnx import import_model


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


@pytest.mark.parametrize("name", sampled(sorted(collect_cases()), 6))
def test_node_case_compiled(name: str) -> None:
    """The compiled kernels reproduce ONNX's expected outputs."""
    expected, got = _compiled_outputs(name)
    assert len(got) == len(expected)
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        problem = _compare(want, np.asarray(have))
        assert not problem, f"output #{i}: {problem}"
