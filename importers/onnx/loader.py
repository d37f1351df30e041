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
from onnx import external_data_helper, numpy_helper, shape_inference

from fusec.importers.onnx.context import OnnxImportError, printable


def load_model(path: str | Path) -> onnx.ModelProto:
    """Parse `path`, check and load its external data, infer static shapes."""
    path = Path(path)
    if not path.is_file():
        raise OnnxImportError(f"cannot read '{printable(str(path))}': no such file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf raises its own DecodeError, among others
        raise OnnxImportError(f"'{printable(str(path))}' is not a valid ONNX model: "
                              f"{printable(str(err))}") from None
    folder = path.resolve().parent
    external = [t for t in _all_tensors(model) if external_data_helper.uses_external_data(t)]
    for tensor in external:
        _check_location(tensor, folder)
    if external:
        external_data_helper.load_external_data_for_model(model, str(folder))
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
    return numpy_helper.to_array(tensor)


def _check_location(tensor: onnx.TensorProto, folder: Path) -> None:
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
