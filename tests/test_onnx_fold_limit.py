"""Import-time folding is capped by size: a node whose result would be huge
stays an op (a broadcast of one element, for ConstantOfShape) instead of
being allocated while importing."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from fusec.importers.onnx import OnnxImportError, import_model  # noqa: E402
from fusec.reference.interpreter import run_module  # noqa: E402


def _filled(shape: list[int], value: float = 1.5) -> onnx.ModelProto:
    """y = ConstantOfShape(shape) with `value`, the shape an initializer."""
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [value])
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["y"], value=fill)], "g", [], [y],
        [numpy_helper.from_array(np.array(shape, np.int64), "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_small_constant_of_shape_is_folded() -> None:
    text = import_model(_filled([4, 4])).text
    assert "nn.constant dense<1.5> : tensor<4x4xf32>" in text
    assert "broadcast_to" not in text


def test_a_big_constant_of_shape_stays_a_broadcast() -> None:
    result = import_model(_filled([300, 300]), fold_max_elements=1000)
    assert "nn.constant dense<1.5> : tensor<1x1xf32>" in result.text
    assert "nn.broadcast_to" in result.text and "tensor<300x300xf32>" in result.text
    (y,) = run_module(result.module, {})
    np.testing.assert_array_equal(y, np.full((300, 300), 1.5))


def _limited(preexec_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (preexec_bytes, preexec_bytes))


def test_constant_of_shape_100000_squared_imports_without_allocating(tmp_path: Path) -> None:
    """37 GiB were allocated at import time; now the import runs in 4 GiB."""
    path = tmp_path / "m.onnx"
    onnx.save(_filled([100000, 100000]), path)
    proc = subprocess.run(
        [sys.executable, "-m", "fusec", "import", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
        preexec_fn=lambda: _limited(4 << 30))
    assert proc.returncode == 0, proc.stderr
    assert "nn.broadcast_to %y : (tensor<1x1xf32>) -> tensor<100000x100000xf32>" in proc.stdout


def test_an_unsupported_op_too_big_to_fold_is_a_clear_error() -> None:
    """Tile has no handler: it can only be folded, and not past the cap."""
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [40, 40])
    graph = helper.make_graph(
        [helper.make_node("Tile", ["x", "r"], ["y"], name="tile_1")], "g", [], [y],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "x"),
         numpy_helper.from_array(np.array([10, 10], np.int64), "r")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert import_model(model).text.count("tensor<40x40xf32>") >= 1
    with pytest.raises(OnnxImportError, match=r"^node 'tile_1' \(Tile\): op type Tile is not "
                                              r"supported, and its result is too big"):
        import_model(model, fold_max_elements=100)
