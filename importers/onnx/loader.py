"""Reading an ONNX file safely, with its external data and inferred shapes.

A model is untrusted input. Its external-data tensors name files by relative
path; fusec reads them only from the model's own folder, so a `location` such
as `../../etc/passwd`, an absolute path or a symbolic link leading out of the
folder is refused before anything is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper, shape_inference

from fusec.importers.onnx.context import OnnxImportError, printable


def load_model(path: str | Path) -> onnx.ModelProto:
    """Parse `path`, check and load its external data, infer static shapes."""
    path = Path(path)
    shown = printable(str(path))
    if not path.is_file():
        raise OnnxImportError(f"cannot read '{shown}': no such file")
    if path.stat().st_size == 0:
        raise OnnxImportError(f"'{shown}' is empty: it is not an ONNX model")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf raises its own DecodeError, among others
        raise OnnxImportError(f"'{shown}' is not a valid ONNX model: "
                              f"{printable(str(err))}") from None
    if not model.HasField("graph") and not model.opset_import:
        # Protobuf reads many a stray file as a message with unknown fields.
        raise OnnxImportError(f"'{shown}' is not an ONNX model: it holds no graph and no opset")
    folder = path.resolve().parent
    external = [t for t in _all_tensors(model) if external_data_helper.uses_external_data(t)]
    sources = {t.name: _check_location(t, folder) for t in external}
    if external:
        external_data_helper.load_external_data_for_model(model, str(folder))
    for tensor in _all_tensors(model):
        _check_data_size(tensor, sources.get(tensor.name, shown))
    return infer_shapes(model)


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX shape inference, used to cross-check the importer's own shapes;
    a model it cannot handle is imported without the cross-check."""
    try:
        return shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # inference is advisory: the importer computes every shape itself
        return model


def tensor_to_array(tensor: onnx.TensorProto) -> np.ndarray:
    """A tensor's values; external data must have been loaded by `load_model`,
    never read here relative to the working directory."""
    if external_data_helper.uses_external_data(tensor):
        raise OnnxImportError(f"tensor '{printable(tensor.name)}' has external data that is not "
                              "loaded; import the model from its file")
    try:
        return numpy_helper.to_array(tensor)
    except ValueError as err:  # data that does not fill the shape (a model not from a file)
        raise OnnxImportError(f"tensor '{printable(tensor.name)}' has data that does not match "
                              f"its shape {list(tensor.dims)}: {printable(str(err))}") from None


def _check_location(tensor: onnx.TensorProto, folder: Path) -> str:
    """Refuse a location outside `folder` or a range past the file's end;
    returns the location, printable."""
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    what = f"tensor '{printable(tensor.name)}' names external data file '{printable(location)}'"
    if not location:
        raise OnnxImportError(f"tensor '{printable(tensor.name)}' has external data but "
                              "no location")
    relative = Path(location)
    if relative.is_absolute() or ".." in relative.parts or location.startswith(("/", "\\")):
        raise OnnxImportError(f"{what}: external data must lie in the model's folder "
                              "(no absolute paths, no '..')")
    target = (folder / relative).resolve()
    if not target.is_relative_to(folder):
        raise OnnxImportError(f"{what}, which resolves outside the model's folder")
    if not target.is_file():
        raise OnnxImportError(f"{what}, which does not exist")
    _check_range(info, target.stat().st_size, what)
    return printable(location)


def _check_range(info: dict[str, str], size: int, what: str) -> None:
    """`offset` and `length` must be integers that lie within the file."""
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else size - offset
    except ValueError:
        raise OnnxImportError(f"{what} with an offset or length that is not an integer") from None
    if offset < 0 or length < 0 or offset + length > size:
        raise OnnxImportError(f"{what}, but bytes {offset}..{offset + length} lie past the end "
                              f"of that file ({size} bytes)")


# The element types whose size in bytes is that of their NumPy type; others
# (strings, sub-byte types) are left to `numpy_helper.to_array`.
_BYTE_SIZED = frozenset(getattr(onnx.TensorProto, n) for n in (
    "FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8",
    "UINT16", "UINT32", "UINT64", "BOOL"))


def _check_data_size(tensor: onnx.TensorProto, source: str) -> None:
    """The tensor's data fills its shape exactly: raw bytes, or typed values."""
    if tensor.data_type not in _BYTE_SIZED:
        return
    count = int(np.prod(tensor.dims, dtype=np.int64))
    if tensor.HasField("raw_data"):
        itemsize = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        have, need, unit = len(tensor.raw_data), count * itemsize, "bytes"
    else:
        have = len(getattr(tensor, helper.tensor_dtype_to_field(tensor.data_type)))
        need, unit = count, "values"
    if have != need:
        raise OnnxImportError(
            f"tensor '{printable(tensor.name)}' in '{source}' has {have} {unit} of data, but "
            f"its shape {list(tensor.dims)} needs {need}")


def _all_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor attributes, in every subgraph."""
    yield from _graph_tensors(model.graph)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _graph_tensors(attr.g)
            for sub in attr.graphs:
                yield from _graph_tensors(sub)
