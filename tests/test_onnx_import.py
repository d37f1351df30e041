"""`fusec import` on hand-built ONNX models: errors name the node, untrusted
names and external-data paths are handled safely, older opset forms and
import-time folding work, and weights can travel as arguments.

Numbers are checked against ONNX's own reference evaluator.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from fusec.command import main as fusec_main  # noqa: E402
from fusec.importers.onnx import NeedsConstantError, OnnxImportError, import_model  # noqa: E402
from fusec.importers.onnx.emit import sanitize  # noqa: E402
from fusec.reference.interpreter import run_module  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes: list, inputs: list, outputs: list, inits: tuple = (), opset: int = 18,
           name: str = "g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name: str, shape: list[int] | None, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tol: float = 1e-5) -> str:
    """Import, run, compare every output with ONNX's reference; return the text."""
    result = import_model(model)
    got = run_module(result.module, {result.inputs[k]: v for k, v in feeds.items()})
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return result.text


RNG = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# --- errors name the node ------------------------------------------------------------


def test_unsupported_op_names_node_and_type() -> None:
    model = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="TopK_7")],
                   [_vi("x", [4])], [_vi("v", [2])],
                   [numpy_helper.from_array(np.array([2], np.int64), "k")])
    with pytest.raises(OnnxImportError, match=r"^node 'TopK_7' \(TopK\): op type TopK is not"):
        import_model(model)


def test_unsupported_attribute_names_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool_3", kernel_shape=[2, 2],
                            dilations=[2, 2])
    path = tmp_path / "m.onnx"
    onnx.save(_model([node], [_vi("x", [1, 1, 6, 6])], [_vi("y", None)]), path)
    assert fusec_main(["import", str(path), "-o", str(tmp_path / "m.mlir")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: node 'pool_3' (MaxPool): dilations [2, 2] are not supported")
    assert not (tmp_path / "m.mlir").exists()


def test_conv_auto_pad_unknown_is_refused() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="Conv_3", auto_pad="SIDEWAYS")
    model = _model([node], [_vi("x", [1, 1, 4, 4])], [_vi("y", None)],
                   [numpy_helper.from_array(_rand(1, 1, 3, 3), "w")])
    with pytest.raises(OnnxImportError, match="node 'Conv_3' \\(Conv\\): auto_pad 'SIDEWAYS'"):
        import_model(model)


def test_not_an_onnx_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x08\xff\xff\xff not protobuf")
    with pytest.raises(OnnxImportError, match="is not a valid ONNX model"):
        import_model(path)


def test_bad_arguments_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        fusec_main(["import"])
    assert exit_info.value.code == 1
    assert "fusec import: error" in capsys.readouterr().err


def test_dynamic_input_shape_is_a_clear_error() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["batch", 4])],
                   [_vi("y", None)])
    with pytest.raises(OnnxImportError, match="dynamic shapes are not supported: input 'x'"):
        import_model(model)


def test_runtime_shape_input_must_be_constant() -> None:
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                   [_vi("x", [2, 3]), _vi("s", [2], TensorProto.INT64)], [_vi("y", None)])
    with pytest.raises(NeedsConstantError, match=r"the target shape .* must be a constant") as e:
        import_model(model)
    assert e.value.graph_input == "s"
    text = import_model(model, bind={"s": np.array([3, 2])}).text
    assert "nn.reshape" in text


# --- untrusted names and paths ---------------------------------------------------------


def test_hostile_names_never_reach_the_text() -> None:
    evil = 'x" } func.func @pwn(%a: tensor<1xf32>) {\n// '
    node = helper.make_node("Relu", [evil], ["y\n}\n"], name="n\u2028")
    model = _model([node], [_vi(evil, [2])], [_vi("y\n}\n", [2])], name="@evil\n")
    result = import_model(model)
    lines = result.text.splitlines()
    code = [line for line in lines if not line.startswith("//")]
    assert len(lines) - len(code) == 2  # the header; no name broke out of its comment
    assert "@pwn" not in "\n".join(code) and '"' not in "\n".join(code)
    assert all(re.match(r"(func\.func @|  %|  func\.return |}$)", line) for line in code)
    assert re.search(r"^func\.func @[A-Za-z0-9_]+\(%[A-Za-z0-9_]+: ", result.text, re.M)
    (y,) = run_module(result.module, {result.inputs[evil]: np.array([-1.0, 2.0])})
    np.testing.assert_array_equal(y, [0.0, 2.0])


@pytest.mark.parametrize("name", ["input.1", "x_0", "_1", "1", "a b", "", "ü"])
def test_sanitized_names_survive_parsing(name: str) -> None:
    """Argument names are what `fusec run --inputs` keys by: they must parse
    back unchanged (xDSL drops a `_<digits>` suffix, so none ends that way)."""
    safe = sanitize(name)
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", safe)
    assert not re.search(r"_\d+$", safe)


def test_colliding_names_stay_distinct() -> None:
    node = helper.make_node("Add", ["a.1", "a_1"], ["y"])
    model = _model([node], [_vi("a.1", [2]), _vi("a_1", [2])], [_vi("y", [2])])
    result = import_model(model)
    assert len(set(result.inputs.values())) == 2
    _check(model, {"a.1": _rand(2), "a_1": _rand(2)})


def _external_model(tmp_path: Path, location: str) -> Path:
    tensor = numpy_helper.from_array(_rand(4), "w")
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    tensor.ClearField("raw_data")
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])],
                   [_vi("y", [4])], [tensor])
    path = tmp_path / "model" / "m.onnx"
    path.parent.mkdir(exist_ok=True)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"])
def test_external_data_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    (tmp_path / "secret.bin").write_bytes(np.ones(4, np.float32).tobytes())
    with pytest.raises(OnnxImportError, match="external data"):
        import_model(_external_model(tmp_path, location))


def test_external_data_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(np.ones(4, np.float32).tobytes())
    path = _external_model(tmp_path, "link.bin")
    (path.parent / "link.bin").symlink_to(tmp_path / "secret.bin")
    with pytest.raises(OnnxImportError, match="resolves outside the model's folder"):
        import_model(path)


def test_unloaded_external_data_of_a_model_proto_is_refused(tmp_path: Path) -> None:
    """A ModelProto in memory never reads files relative to the working directory."""
    model = onnx.load(_external_model(tmp_path, "w.bin"), load_external_data=False)
    with pytest.raises(OnnxImportError, match="external data that is not loaded"):
        import_model(model)


def test_external_data_beside_the_model_is_read(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "w.bin")
    (path.parent / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    result = import_model(path)
    (y,) = run_module(result.module, {"x": np.zeros(4)})
    np.testing.assert_array_equal(y, [0, 1, 2, 3])


# --- opset forms, folding, weights ---------------------------------------------------------


def test_opset13_reduce_axes_attribute_and_split_input() -> None:
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
        helper.make_node("Squeeze", ["m", "ax"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "ax"], ["u"]),
    ]
    inits = [numpy_helper.from_array(np.array([1, 3], np.int64), "sizes"),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    model = _model(nodes, [_vi("x", [2, 4])], [_vi("a", None), _vi("b", None), _vi("u", None)],
                   inits, opset=13)
    _check(model, {"x": _rand(2, 4)})


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_opset13_reductions(op: str, keepdims: int) -> None:
    """Opset 13: axes are an attribute, except for ReduceSum (an input)."""
    if op == "ReduceSum":
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
        inits = [numpy_helper.from_array(np.array([0, -1], np.int64), "axes")]
    else:
        node = helper.make_node(op, ["x"], ["y"], axes=[0, -1], keepdims=keepdims)
        inits = []
    model = _model([node], [_vi("x", [2, 3, 4])], [_vi("y", None)], inits, opset=13)
    _check(model, {"x": _rand(2, 3, 4)})


def test_softmax_before_opset13_flattens() -> None:
    """Softmax-11 coerces the input to 2-D at `axis` (ONNX's reference
    evaluator implements only the opset-13 meaning, so NumPy is the oracle)."""
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [_vi("x", [2, 3, 4])],
                   [_vi("y", None)], opset=11)
    x = _rand(2, 3, 4)
    (y,) = run_module(import_model(model).module, {"x": x})
    e = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, (e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 4),
                               rtol=1e-6, atol=1e-6)


def test_shape_arithmetic_folds_to_one_reshape() -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape emits only nn.reshape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    model = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", None)], inits)
    text = _check(model, {"x": _rand(2, 3, 4)})
    assert [line.split()[2] for line in text.splitlines() if " = nn." in line] == ["nn.reshape"]


def test_negative_step_slice_and_clip_with_runtime_bounds() -> None:
    nodes = [helper.make_node("Slice", ["x", "st", "en", "axes", "steps"], ["s"]),
             helper.make_node("Clip", ["s", "lo"], ["y"])]
    ints = {"st": [-1], "en": [-100], "axes": [1], "steps": [-2]}
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in ints.items()]
    model = _model(nodes, [_vi("x", [2, 5]), _vi("lo", [])], [_vi("y", None)], inits)
    _check(model, {"x": _rand(2, 5), "lo": np.array(-0.1, np.float32)})


def test_count_include_pad_and_ceil_mode() -> None:
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], count_include_pad=1, ceil_mode=1)
    model = _model([node], [_vi("x", [1, 2, 6, 6])], [_vi("y", None)], opset=19)
    _check(model, {"x": _rand(1, 2, 6, 6)})


def test_conv1d_same_upper_with_bias() -> None:
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_UPPER",
                            strides=[2], group=2)
    inits = [numpy_helper.from_array(_rand(4, 1, 3), "w"),
             numpy_helper.from_array(_rand(4), "b")]
    model = _model([node], [_vi("x", [1, 2, 7])], [_vi("y", None)], inits)
    _check(model, {"x": _rand(1, 2, 7)})


def test_large_weights_become_arguments(tmp_path: Path) -> None:
    w = numpy_helper.from_array(_rand(16, 16), "big.w")
    model = _model([helper.make_node("MatMul", ["x", "big.w"], ["y"])], [_vi("x", [2, 16])],
                   [_vi("y", None)], [w])
    path, out = tmp_path / "m.onnx", tmp_path / "m.mlir"
    onnx.save(model, path)
    assert fusec_main(["import", str(path), "-o", str(out), "--params-above", "1024"]) == 0
    params = dict(np.load(tmp_path / "m.params.npz"))
    assert list(params) == ["big_w"]
    assert "nn.constant" not in out.read_text()
    result = import_model(path, params_above=1024)
    x = _rand(2, 16)
    (y,) = run_module(result.module, {"x": x, **params})
    np.testing.assert_allclose(y, x @ numpy_helper.to_array(w), rtol=1e-5, atol=1e-5)
