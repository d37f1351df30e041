"""Library attention (`{"library": "cudnn_sdpa_bf16", ...}` launches):
cuDNN's fused flash attention, through its graph API.

Why the `nvidia-cudnn-frontend` package here, where the library convolution
calls cuDNN's legacy API through ctypes (`runtime/cudnn_conv.py`): cuDNN has
no legacy call for attention; its fused attention engines are found only by
building an operation graph (`Q Kᵀ`, the scale, the softmax, `P V`), which
the frontend's `graph.sdpa` writes and its heuristics plan. The package is
one wheel per Python version that loads the cuDNN library at run time (no
CUDA build of its own); fusec loads the cuDNN it found
(`analysis/cudnn_library.find_cudnn`) first, so both use the same one.

A launch names, for each of Q, K, V and the output O, the value holding it
and where it lies there: an element offset and the dims and strides of
`[batch, heads, tokens, head dim]` (a head sliced out of a packed QKV
projection, or an output written straight into `[batch, tokens, heads *
dim]`, are read and written in place). The graph of a launch (its shapes,
strides, element type, scale) is built once per device; its workspace is
allocated before a CUDA graph captures the call (`prepare_sdpa`), as the
convolutions' is. Math: f16/bf16 operands, f32 scores and softmax, the
probabilities rounded to the operand type for `P V` (what FlashAttention
does), f32 accumulation.
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusec.analysis.cudnn_library import find_cudnn
from fusec.analysis.diagnostics import FusecError
from fusec.codegen.library_attention import launch_tensors
from fusec.runtime.arrays import device_pointer
from fusec.runtime.device_state import Workspace, per_device

ITEM_BYTES = 2
_TYPES = {"cudnn_sdpa_f16": "HALF", "cudnn_sdpa_bf16": "BFLOAT16"}
_LOCK = threading.Lock()


class SdpaError(FusecError):
    """cuDNN's attention cannot be loaded, built or run."""


_FRONTEND: list[Any] = []


def frontend() -> Any:
    """The `cudnn` module of `nvidia-cudnn-frontend`, imported once after
    loading fusec's cuDNN into the process (so that the frontend finds it)."""
    with _LOCK:
        if _FRONTEND:
            return _FRONTEND[0]
        path = find_cudnn()
        if path is None:
            raise SdpaError("the plan calls cuDNN's attention, and cuDNN is not installed "
                            "here: pip install fusec[cudnn-cu13] (or cudnn-cu12), set "
                            "FUSEC_CUDNN to libcudnn.so.9, or compile with --attention fused")
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            import cudnn
        except (OSError, ImportError) as err:
            raise SdpaError(f"cuDNN's attention needs the nvidia-cudnn-frontend package "
                            f"(pip install fusec[cudnn-cu13], or compile with --attention "
                            f"fused): {err}") from err
        _FRONTEND.append(cudnn)
        return cudnn


@dataclass
class _Graph:
    """One launch's built graph, its tensors (by name) and the
    workspace it asks."""

    graph: Any
    tensors: dict[str, Any]
    workspace: int


class DeviceAttention:
    """Per device: the cuDNN handle, the built graphs by launch, and the
    workspace (`runtime/device_state.Workspace`)."""

    def __init__(self) -> None:
        self.cudnn = frontend()
        self.handle = self.cudnn.create_handle()
        self.graphs: dict[str, _Graph] = {}
        self.workspace = Workspace()

    def graph(self, spec: dict[str, Any]) -> _Graph:
        """The launch's graph, built on first use and shared by every launch
        of the same shapes, strides, type, scale and mask (the layers of a
        model): which values hold the tensors, and where, is the execute's."""
        key = json.dumps([spec["library"], spec["scale"], bool(spec.get("causal", False)),
                          *([w, spec[w]["dims"], spec[w]["strides"]]
                            for w in launch_tensors(spec))])
        with _LOCK:
            built = self.graphs.get(key)
        if built is None:
            built = self._build(spec)
            with _LOCK:
                built = self.graphs.setdefault(key, built)
        return built

    def _build(self, spec: dict[str, Any]) -> _Graph:
        cudnn = self.cudnn
        dtype = getattr(cudnn.data_type, _TYPES[spec["library"]])
        graph = cudnn.pygraph(io_data_type=dtype, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)
        tensors = {name: graph.tensor(name=name, dim=list(spec[name]["dims"]),
                                      stride=list(spec[name]["strides"]), data_type=dtype)
                   for name in launch_tensors(spec) if name != "o"}
        try:
            o, _ = graph.sdpa(name="sdpa", q=tensors["q"], k=tensors["k"], v=tensors["v"],
                              attn_scale=float(spec["scale"]), generate_stats=False,
                              bias=tensors.get("bias"),
                              use_causal_mask=bool(spec.get("causal", False)))
            o.set_output(True).set_dim(list(spec["o"]["dims"])).set_stride(
                list(spec["o"]["strides"])).set_data_type(dtype)
            tensors["o"] = o
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            graph.check_support()
            graph.build_plans()
            size = int(graph.get_workspace_size())
        except Exception as err:  # the frontend raises its own and RuntimeErrors
            raise SdpaError(f"cuDNN cannot run {spec['library']} q {spec['q']['dims']} "
                            f"k {spec['k']['dims']} v {spec['v']['dims']}: {err} (compile "
                            "with --attention fused for fusec's own kernel)") from err
        return _Graph(graph, tensors, size)

    def forward(self, spec: dict[str, Any], args: Sequence[Any], stream_ptr: int) -> None:
        """The launch's attention on the stream at `stream_ptr`: `args` are
        the arrays holding Q, K, V, the bias if any, and O, in that order."""
        built = self.graph(spec)
        space = self.workspace.pointer(built.workspace)
        pack = {built.tensors[name]: device_pointer(a) + ITEM_BYTES * int(spec[name]["offset"])
                for name, a in zip(launch_tensors(spec), args, strict=True)}
        self.cudnn.set_stream(handle=self.handle, stream=stream_ptr)
        try:
            built.graph.execute(pack, space, handle=self.handle)
        except Exception as err:
            raise SdpaError(f"cuDNN's attention ({spec['library']}) failed: {err} (compile "
                            "with --attention fused for fusec's own kernel)") from err


_DEVICES: dict[int, DeviceAttention] = {}


def _device() -> DeviceAttention:
    return per_device(_DEVICES, DeviceAttention)


def check_sdpa(spec: dict[str, Any]) -> None:
    """Fail early when the launch's attention cannot run here."""
    if spec["library"] not in _TYPES:
        raise SdpaError(f"no cuDNN attention for {spec['library']}")
    frontend()


def prepare_sdpa(spec: dict[str, Any], args: Sequence[Any]) -> None:
    """Build the launch's graph and size the workspace (before a graph
    capture, which may allocate nothing)."""
    state = _device()
    state.workspace.pointer(state.graph(spec).workspace)


def run_sdpa(spec: dict[str, Any], args: Sequence[Any], stream_ptr: int) -> None:
    """The launch's attention on the stream at `stream_ptr`."""
    _device().forward(spec, args, stream_ptr)
