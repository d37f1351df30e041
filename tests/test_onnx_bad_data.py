"""ONNX files whose data is broken: each is one clear `error:` line naming the
tensor and the file (or saying the file is not a model), never an internal
error, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from fusec.command import main  # noqa: E402
from fusec.importers.onnx import OnnxImportError, import_model  # noqa: E402


def _add_model(weight: onnx.TensorProto) -> onnx.ModelProto:
    """y = x + w, x and w of four floats."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y],
                              [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _weight(**external: str) -> onnx.TensorProto:
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    if external:
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in external.items():
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return tensor


def _import_error(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    """`fusec import PATH -o ...` fails with one error line and writes nothing."""
    out = path.with_suffix(".mlir")
    assert main(["import", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err
    assert not out.exists()
    return err.strip()


def _save(tmp_path: Path, model: onnx.ModelProto, data: bytes | None = None) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    if data is not None:
        (tmp_path / "w.bin").write_bytes(data)
    return path


FOUR = np.arange(4, dtype=np.float32).tobytes()


def test_external_offset_past_the_end(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    path = _save(tmp_path, _add_model(_weight(location="w.bin", offset="1000", length="16")),
                 FOUR)
    assert _import_error(capsys, path) == (
        "error: tensor 'w' names external data file 'w.bin', but bytes 1000..1016 lie past "
        "the end of that file (16 bytes)")


def test_external_data_too_short(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _save(tmp_path, _add_model(_weight(location="w.bin", offset="8")), FOUR)
    assert _import_error(capsys, path) == (
        "error: tensor 'w' in 'w.bin' has 8 bytes of data, but its shape [4] needs 16")


def test_external_offset_not_an_integer(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    path = _save(tmp_path, _add_model(_weight(location="w.bin", offset="x")), FOUR)
    assert "with an offset or length that is not an integer" in _import_error(capsys, path)


def test_raw_data_too_short(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    weight = _weight()
    weight.raw_data = np.zeros(2, np.float32).tobytes()
    path = _save(tmp_path, _add_model(weight))
    assert _import_error(capsys, path) == (
        f"error: tensor 'w' in '{path}' has 8 bytes of data, but its shape [4] needs 16")


def test_typed_data_too_short_in_memory() -> None:
    """A ModelProto not read from a file: the tensor is named all the same."""
    weight = _weight()
    weight.float_data.extend([1.0, 2.0])
    with pytest.raises(OnnxImportError, match=r"^tensor 'w' has data that does not match "
                                              r"its shape \[4\]"):
        import_model(_add_model(weight))


def test_empty_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"")
    assert _import_error(capsys, path) == f"error: '{path}' is empty: it is not an ONNX model"


def test_a_message_without_graph_or_opset(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(onnx.ModelProto(producer_name="x").SerializeToString())
    assert _import_error(capsys, path) == (
        f"error: '{path}' is not an ONNX model: it holds no graph and no opset")
