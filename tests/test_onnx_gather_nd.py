"""ONNX `GatherND` with constant indices (the dynamo exporter writes it for
BERT's `attention_mask[:, None, None, :]`): imported as one `nn.gather`,
checked against ONNX's reference evaluator in the simulator."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import fusec  # noqa: E402
from fusec.importers.onnx import OnnxImportError, import_model  # noqa: E402

_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(bool): TensorProto.BOOL}


def _model(data: np.ndarray, indices: np.ndarray, out_shape: list[int],
           batch_dims: int = 0) -> onnx.ModelProto:
    kind = _TYPES[data.dtype]
    x = helper.make_tensor_value_info("x", kind, list(data.shape))
    y = helper.make_tensor_value_info("y", kind, out_shape)
    node = helper.make_node("GatherND", ["x", "idx"], ["y"], batch_dims=batch_dims)
    graph = helper.make_graph([node], "g", [x], [y],
                              initializer=[numpy_helper.from_array(indices, "idx")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(("data_shape", "indices", "batch_dims"), [
    # BERT: (1, 8) mask -> (1, 1, 1, 8), index pairs
    ((1, 8), np.stack(np.meshgrid([0], np.arange(8), indexing="ij"), -1)
     .reshape(1, 1, 1, 8, 2), 0),
    ((3, 4, 5), np.array([[2], [0], [-1], [1]]), 0),  # whole rows, a negative index
    ((3, 4, 5), np.array([[[1, 3], [0, -4]]]), 0),  # (1, 2) picks of 5-vectors
    ((2, 4, 3), np.array([[[3], [0]], [[1], [1]]]), 1),  # per batch entry
    ((2, 3, 4, 2), np.array([[[2, 1], [0, 3]], [[1, 0], [2, 2]]]), 1),
])
@pytest.mark.parametrize("dtype", ["float32", "bool"])
def test_gather_nd_matches_onnx(data_shape: tuple[int, ...], indices: np.ndarray,
                                batch_dims: int, dtype: str) -> None:
    rng = np.random.default_rng(4)
    data = rng.standard_normal(data_shape).astype(np.float32)
    if dtype == "bool":
        data = data > 0
    indices = indices.astype(np.int64)
    (expected,) = ReferenceEvaluator(_model(data, indices, [], batch_dims)).run(None, {"x": data})
    result = import_model(_model(data, indices, list(expected.shape), batch_dims))
    assert "nn.gather" in result.text
    got = np.asarray(fusec.compile(result.text, device="sim")(data))
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_gather_nd_errors() -> None:
    data = np.zeros((2, 3), np.float32)
    with pytest.raises(OnnxImportError, match="out of range"):
        import_model(_model(data, np.array([[0, 3]], np.int64), [1]))
    with pytest.raises(OnnxImportError, match="do not index data of shape"):
        import_model(_model(data, np.array([[0, 1, 0]], np.int64), [1]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("GatherND", ["x", "i"], ["y"])], "g",
                              [x, i], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(OnnxImportError, match="must be a constant known at import time"):
        import_model(model)
