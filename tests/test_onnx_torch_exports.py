"""ONNX gaps found on real PyTorch exports: `IsNaN`/`IsInf` (written by the
export of `scaled_dot_product_attention`) and import-time folding where
ONNX's reference evaluator fails on valid data (BERT's `GatherElements`)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fusec  # noqa: E402
from fusec.importers.onnx import import_model  # noqa: E402


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto],
           initializers: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_isnan_and_isinf() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    outs = [helper.make_tensor_value_info(n, TensorProto.BOOL, [2, 4])
            for n in ("nan", "inf", "pos", "neg")]
    nodes = [helper.make_node("IsNaN", ["x"], ["nan"]),
             helper.make_node("IsInf", ["x"], ["inf"]),
             helper.make_node("IsInf", ["x"], ["pos"], detect_negative=0),
             helper.make_node("IsInf", ["x"], ["neg"], detect_positive=0)]
    result = import_model(_model(nodes, [x], outs))
    data = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    data[0, 1], data[1, 2], data[1, 3] = np.nan, np.inf, -np.inf
    got = fusec.compile(result.text)(data)
    expected = (np.isnan(data), np.isinf(data), np.isposinf(data), np.isneginf(data))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(np.asarray(g, dtype=bool), e)


def test_gather_elements_folds_where_the_onnx_evaluator_fails() -> None:
    """ONNX's evaluator returns one element for (1, 100) data and (1, 16)
    indices (np.choose takes at most 32 choices) and raises; fusec folds it."""
    rng = np.random.default_rng(1)
    table = rng.standard_normal((1, 100)).astype(np.float32)
    index = rng.integers(-100, 100, size=(1, 16)).astype(np.int64)
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(index, "index")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    nodes = [helper.make_node("GatherElements", ["table", "index"], ["g"], axis=1),
             helper.make_node("Add", ["x", "g"], ["y"])]
    result = import_model(_model(nodes, [x], [y], inits))
    data = rng.standard_normal((1, 16)).astype(np.float32)
    expected = data + np.take_along_axis(table, index % 100, axis=1)
    np.testing.assert_allclose(fusec.compile(result.text)(data), expected, rtol=1e-6)


@pytest.mark.parametrize("mask", ["bool", "causal"])
def test_torch_attention_export_imports(mask: str) -> None:
    """PyTorch's export of `F.scaled_dot_product_attention` (with IsNaN and
    Where around its softmax) imports and matches eager PyTorch."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional

    class Attention(torch.nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if mask == "causal":
                return functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            keep = torch.ones(4, 4, dtype=torch.bool).tril()
            return functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated
        try:
            torch.onnx.export(Attention(), (q, k, v), buffer, dynamo=False, opset_version=18,
                              input_names=["q", "k", "v"])
        except Exception as err:  # an exporter that needs more than torch itself
            pytest.skip(f"torch.onnx.export is unavailable here: {err}")
    model = onnx.load_from_string(buffer.getvalue())
    if mask == "bool":  # the masked softmax is guarded with IsNaN/Where
        assert "IsNaN" in {n.op_type for n in model.graph.node}
    result = import_model(model)
    got = fusec.compile(result.text)(q.numpy(), k.numpy(), v.numpy())
    with torch.no_grad():
        expected = Attention()(q, k, v).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
