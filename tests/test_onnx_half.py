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
