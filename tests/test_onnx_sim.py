"""A subset of ONNX's node tests through the whole compiler: `fusec import`,
`fusec.compile` (fusion on) and the generated kernels, on the GPU or, without
one, in numba's CUDA simulator.

One small case per supported op, and two function bodies (the simulator is
slow); the full run of every case the importer passes is reported in
docs/onnx.md.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from test_onnx_node import _compare, collect_cases, outcome_of

import fusec
from fusec.importers.onnx import import_model

SUBSET = [
    "test_abs", "test_add", "test_averagepool_2d_precomputed_pads",
    "test_basic_conv_without_padding", "test_batchnorm_example", "test_cast_DOUBLE_to_FLOAT",
    "test_clip_default_inbounds", "test_concat_1d_axis_0", "test_div_example",
    "test_equal", "test_erf", "test_exp_example", "test_expand_dim_changed",
    "test_flatten_axis1", "test_gather_negative_indices", "test_gelu_default_1",
    "test_gemm_default_vector_bias", "test_gemm_transposeB", "test_globalaveragepool_precomputed",
    "test_globalmaxpool_precomputed", "test_greater_bcast", "test_greater_equal_bcast",
    "test_layer_normalization_2d_axis1", "test_less", "test_less_equal_bcast", "test_log",
    "test_logsoftmax_example_1", "test_matmul_2d", "test_max_example",
    "test_maxpool_2d_precomputed_same_upper", "test_min_example", "test_mul_bcast",
    "test_neg_example", "test_pow", "test_reciprocal", "test_reduce_mean_do_not_keepdims_example",
    "test_reduce_sum_keepdims_example", "test_relu", "test_reshape_reordered_all_dims",
    "test_sigmoid_example", "test_slice_negative_axes", "test_softmax_example",
    "test_softmax_example_expanded", "test_layer_normalization_2d_axis1_expanded",
    "test_split_equal_parts_2d_opset13", "test_sqrt", "test_squeeze", "test_sub_example",
    "test_tanh_example", "test_transpose_all_permutations_0", "test_triu_out_pos",
    "test_unsqueeze_axis_0", "test_where_example",
]


def _compiled_outputs(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """ONNX's expected outputs and those of the compiled kernels."""
    case = collect_cases()[name]
    outcome = outcome_of(name)
    assert outcome.status == "pass", outcome.detail
    result = import_model(case.model, bind={k: case.feeds[k] for k in outcome.bound})
    model = fusec.compile(result.text, device="auto")
    out = model(*[case.feeds[k] for k in result.inputs])
    return case.expected, list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name", SUBSET)
def test_node_case_compiled(name: str) -> None:
    """The compiled kernels reproduce ONNX's expected outputs."""
    expected, got = _compiled_outputs(name)
    for want, have in zip(expected, got, strict=True):
        problem = _compare(want, np.asarray(have))
        assert not problem, problem
