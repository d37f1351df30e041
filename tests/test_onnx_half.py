"""An ONNX model in f16, end to end: built with onnx.helper (f16 input,
f16 initializers, a MatMul, bias, ReLU, scale and Softmax), imported by
`fusec.importers.onnx`, compiled with fusion on, run in the simulator, and
compared with onnxruntime (where installed) and with the reference
interpreter at f16's tolerance (`dialects/element_types.py`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fusec  # noqa: E402
from fusec.compiler.parsing import make_context, parse_module  # noqa: E402
from fusec.dialects.element_types import element  # noqa: E402
from fusec.importers.onnx import import_model  # noqa: E402
from fusec.reference.interpreter import run_module  # noqa: E402

TOL = element("f16").tolerance


def _f16_model() -> Any:
    rng = np.random.default_rng(0)
    params = {"W": rng.standard_normal((8, 16)) * 0.3, "b": rng.standard_normal(16),
              "g": rng.standard_normal(16)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Mul", ["r", "g"], ["rg"]),
             helper.make_node("Softmax", ["rg"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes, "mlp_softmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 16])],
        [numpy_helper.from_array(a.astype(np.float16), n) for n, a in params.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _close(got: np.ndarray, want: np.ndarray) -> None:
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    assert err <= TOL * scale, err


def test_f16_onnx_model_imports_compiles_and_runs() -> None:
    model = _f16_model()
    result = import_model(model)
    assert "xf16>" in result.text and "f32>" not in result.text  # stays f16 throughout
    compiled = fusec.compile(result.text, device="sim")
    assert compiled.launches <= 2
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float16)
    got = compiled(x)
    assert got.dtype == np.float16 and got.shape == (4, 16)
    (want,) = run_module(parse_module(make_context(), result.text, "m.mlir"), [x])
    _close(got, want)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"x": x})
    _close(got, theirs)


def _bf16_init(name: str, a: np.ndarray) -> Any:
    """A BFLOAT16 initializer as exporters write it: raw uint16 bit patterns."""
    from fusec.dialects.element_types import bf16_bits

    return helper.make_tensor(name, TensorProto.BFLOAT16, a.shape,
                              bf16_bits(a.astype(np.float32)).tobytes(), raw=True)


def _bf16_model() -> Any:
    """x (f32) cast to bf16, a bf16 MatMul, a bf16 scalar Constant added,
    ReLU, a bf16 result and its cast back to f32."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
             helper.make_node("MatMul", ["xb", "W"], ["h"]),
             helper.make_node("Constant", [], ["c"],
                              value=_bf16_init("c", np.array(0.75, np.float32))),
             helper.make_node("Add", ["h", "c"], ["hc"]),
             helper.make_node("Relu", ["hc"], ["y"]),
             helper.make_node("Cast", ["y"], ["yf"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "bf16_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4, 16]),
         helper.make_tensor_value_info("yf", TensorProto.FLOAT, [4, 16])],
        [_bf16_init("W", rng.standard_normal((8, 16)) * 0.3)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_bf16_onnx_model_imports_compiles_and_runs() -> None:
    from fusec.dialects.element_types import bf16_values, round_to_bf16

    result = import_model(_bf16_model())
    assert "tensor<8x16xbf16>" in result.text and "nn.cast" in result.text
    compiled = fusec.compile(result.text, device="sim")
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    y, yf = compiled(x)
    assert y.dtype == np.float32 and yf.dtype == np.float32  # bf16 values as float32
    np.testing.assert_array_equal(y, yf)
    (want, _) = run_module(parse_module(make_context(), result.text, "m.mlir"), [x])
    w = bf16_values(np.frombuffer(_bf16_model().graph.initializer[0].raw_data, np.uint16))
    mine = np.maximum(round_to_bf16(x).astype(np.float64) @ w.reshape(8, 16) + 0.75, 0)
    scale = max(1.0, float(np.abs(mine).max()))
    tol = element("bf16").tolerance * scale
    assert float(np.abs(y - want).max()) <= tol and float(np.abs(y - mine).max()) <= tol
