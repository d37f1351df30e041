"""Library convolutions (`{"library": "cudnn_conv_f16", ...}` launches):
cuDNN's convolution forward, called through ctypes on the plan's stream.
NCHW tensors and an OIHW filter, or with `"layout": "nhwc"` NHWC tensors and
an OHWI filter (cuDNN's own format for its tensor-core kernels, which
otherwise transpose NCHW operands in and out around every call).

Why cuDNN's legacy (descriptor) API and not its graph API or the
`cudnn-frontend` package: a fusec launch is one convolution whose epilogue
fusec's own kernel computes, exactly what `cudnnConvolutionForward` does,
in the cuDNN 8 and 9 libraries PyTorch and the `nvidia-cudnn` wheels ship;
it needs no compiled extension (the frontend is C++ with Python bindings
built per CUDA version), and its calls can be captured in a CUDA graph once
the algorithm and the workspace are chosen (`prepare`), as the direct cuBLAS
path does (`runtime/cublas_direct.py`).

Per device, one cuDNN handle and one workspace, grown (never shrunk: a
captured graph keeps the address it recorded) to what the chosen
algorithms ask. Per launch (its shapes, strides, pads, dilations, groups,
element type and math), descriptors made once and the algorithm cuDNN's
heuristics rank first among those whose workspace fits
`WORKSPACE_LIMIT` (what PyTorch does with `cudnn.benchmark` off).

Math: f16 and bf16 on tensor cores with f32 accumulation; f32 with TF32
tensor cores only where the launch says `tf32` (the compile's
`conv_tf32`; from `torch.compile`, PyTorch's
`torch.backends.cudnn.allow_tf32`), else FMA math (full f32); f64 in f64.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusec.analysis.cudnn_library import find_cudnn
from fusec.analysis.diagnostics import FusecError
from fusec.runtime.arrays import device_pointer
from fusec.runtime.device_state import Workspace, per_device

WORKSPACE_LIMIT = 256 * 1024 * 1024
"""The most workspace one convolution may ask (bytes); algorithms asking more
are passed over."""

# cudnnDataType_t
_FLOAT, _DOUBLE, _HALF, _BFLOAT16 = 0, 1, 2, 9
# cudnnMathType_t
_DEFAULT_MATH, _TENSOR_OP_MATH, _FMA_MATH = 0, 1, 3
_NCHW, _NHWC = 0, 1  # cudnnTensorFormat_t
_CROSS_CORRELATION = 1  # cudnnConvolutionMode_t
_ALGO_COUNT = 10  # cudnnConvolutionFwdAlgo_t has 8 values; ask for all

# library name -> (data type, compute type, scalars are doubles)
TYPES = {
    "cudnn_conv_f32": (_FLOAT, _FLOAT, False),
    "cudnn_conv_f64": (_DOUBLE, _DOUBLE, True),
    "cudnn_conv_f16": (_HALF, _FLOAT, False),
    "cudnn_conv_bf16": (_BFLOAT16, _FLOAT, False),  # bf16 tensors are uint16 bits
}


class _AlgoPerf(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("math_type", ctypes.c_int), ("reserved", ctypes.c_int * 3)]


class CudnnError(FusecError):
    """A cuDNN call failed or cuDNN cannot be loaded."""


_LIB: ctypes.CDLL | None = None
_LOCK = threading.Lock()


def library() -> ctypes.CDLL:
    """cuDNN, loaded once (`analysis/cudnn_library.find_cudnn`)."""
    global _LIB
    with _LOCK:
        if _LIB is None:
            path = find_cudnn()
            if path is None:
                raise CudnnError("the plan calls cuDNN, which is not installed here: "
                                 "pip install fusec[cudnn-cu13] (or cudnn-cu12), or set "
                                 "FUSEC_CUDNN to libcudnn.so.9, or compile with --conv fused")
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                raise CudnnError(f"cuDNN cannot be loaded from {path}: {err}") from err
            lib.cudnnGetErrorString.restype = ctypes.c_char_p
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            _LIB = lib
        return _LIB


def version() -> int:
    """cuDNN's version number (90100 for 9.1.0)."""
    return int(library().cudnnGetVersion())


def _check(status: int, what: str) -> None:
    if status != 0:
        text = library().cudnnGetErrorString(status)
        raise CudnnError(f"cuDNN {what} failed: {text.decode() if text else status}")


def _call(name: str, *args: Any) -> None:
    _check(getattr(library(), name)(*args), name)


@dataclass
class _Plan:
    """One launch's descriptors, algorithm and workspace size."""

    x: ctypes.c_void_p
    w: ctypes.c_void_p
    y: ctypes.c_void_p
    conv: ctypes.c_void_p
    algo: int
    workspace: int
    double: bool


def _descriptor(create: str) -> ctypes.c_void_p:
    d = ctypes.c_void_p()
    _call(create, ctypes.byref(d))
    return d


def _nchw(shape: Sequence[int], nhwc: bool) -> tuple[int, ...]:
    """A tensor's dimensions in the order cuDNN's 4-D descriptors take them
    (N, C, H, W, whatever the memory format)."""
    dims = tuple(int(s) for s in shape)
    return (dims[0], dims[3], dims[1], dims[2]) if nhwc else dims


def _tensor(dtype: int, shape: Sequence[int], nhwc: bool) -> ctypes.c_void_p:
    d = _descriptor("cudnnCreateTensorDescriptor")
    _call("cudnnSetTensor4dDescriptor", d, _NHWC if nhwc else _NCHW, dtype,
          *_nchw(shape, nhwc))
    return d


def math_type(spec: dict[str, Any]) -> int:
    """cuDNN's math type for a launch: tensor cores for half types, TF32 for
    f32 only where allowed, else plain FMAs."""
    dtype = TYPES[spec["library"]][0]
    if dtype in (_HALF, _BFLOAT16):
        return _TENSOR_OP_MATH
    if dtype == _FLOAT and spec.get("tf32"):
        return _DEFAULT_MATH
    return _FMA_MATH


class DeviceConvs:
    """cuDNN state of one device: the handle, the workspace and the plans."""

    def __init__(self) -> None:
        self.handle = ctypes.c_void_p()
        _call("cudnnCreate", ctypes.byref(self.handle))
        self.plans: dict[tuple[Any, ...], _Plan] = {}
        self.workspace = Workspace()  # graphs may hold old addresses: never freed

    def plan(self, spec: dict[str, Any], x_shape: Sequence[int], w_shape: Sequence[int],
             y_shape: Sequence[int]) -> _Plan:
        """The launch's plan, made on first use (no GPU work: capturable)."""
        key = (spec["library"], tuple(x_shape), tuple(w_shape), tuple(y_shape),
               tuple(spec["strides"]), tuple(spec["pads"]), tuple(spec["dilations"]),
               spec["groups"], bool(spec.get("tf32")), spec.get("layout", "nchw"))
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self._new_plan(spec, x_shape, w_shape, y_shape)
        return plan

    def _new_plan(self, spec: dict[str, Any], x_shape: Sequence[int],
                  w_shape: Sequence[int], y_shape: Sequence[int]) -> _Plan:
        if spec["library"] not in TYPES:
            raise CudnnError(f"no cuDNN convolution for {spec['library']}")
        dtype, compute, double = TYPES[spec["library"]]
        nhwc = spec.get("layout", "nchw") == "nhwc"
        x, y = _tensor(dtype, x_shape, nhwc), _tensor(dtype, y_shape, nhwc)
        w = _descriptor("cudnnCreateFilterDescriptor")
        _call("cudnnSetFilter4dDescriptor", w, dtype, _NHWC if nhwc else _NCHW,
              *_nchw(w_shape, nhwc))
        conv = _descriptor("cudnnCreateConvolutionDescriptor")
        top, left = spec["pads"][0], spec["pads"][1]
        (sh, sw), (dh, dw) = spec["strides"], spec["dilations"]
        _call("cudnnSetConvolution2dDescriptor", conv, top, left, sh, sw, dh, dw,
              _CROSS_CORRELATION, compute)
        _call("cudnnSetConvolutionGroupCount", conv, int(spec["groups"]))
        _call("cudnnSetConvolutionMathType", conv, math_type(spec))
        out = (ctypes.c_int * 4)()
        _call("cudnnGetConvolutionNdForwardOutputDim", conv, x, w, 4, out)
        if tuple(out) != _nchw(y_shape, nhwc):
            raise CudnnError(f"cuDNN computes a {list(out)} (NCHW) result where the plan "
                             f"holds {list(y_shape)} ({spec['library']}, "
                             f"{'NHWC' if nhwc else 'NCHW'})")
        perf = (_AlgoPerf * _ALGO_COUNT)()
        count = ctypes.c_int()
        _call("cudnnGetConvolutionForwardAlgorithm_v7", self.handle, x, w, conv, y,
              _ALGO_COUNT, ctypes.byref(count), perf)
        for p in perf[:count.value]:
            if p.status == 0 and p.memory <= WORKSPACE_LIMIT:
                size = ctypes.c_size_t()
                status = library().cudnnGetConvolutionForwardWorkspaceSize(
                    self.handle, x, w, conv, y, p.algo, ctypes.byref(size))
                if status == 0:
                    return _Plan(x, w, y, conv, int(p.algo), int(size.value), double)
        raise CudnnError(f"cuDNN has no algorithm for {spec['library']} x {list(x_shape)} "
                         f"w {list(w_shape)} within {WORKSPACE_LIMIT >> 20} MiB of workspace")

    def forward(self, spec: dict[str, Any], args: Sequence[Any], stream_ptr: int) -> None:
        """`y = conv(x, w)` of the launch, on the stream at `stream_ptr`."""
        x, w, y = args[:3]
        plan = self.plan(spec, x.shape, w.shape, y.shape)
        space = self.workspace.pointer(plan.workspace)
        _call("cudnnSetStream", self.handle, ctypes.c_void_p(stream_ptr))
        scalar = ctypes.c_double if plan.double else ctypes.c_float
        one, zero = scalar(1.0), scalar(0.0)
        _call("cudnnConvolutionForward", self.handle, ctypes.byref(one), plan.x,
              ctypes.c_void_p(device_pointer(x)), plan.w, ctypes.c_void_p(device_pointer(w)),
              plan.conv,
              plan.algo, ctypes.c_void_p(space), ctypes.c_size_t(plan.workspace),
              ctypes.byref(zero), plan.y, ctypes.c_void_p(device_pointer(y)))


_DEVICES: dict[int, DeviceConvs] = {}


def _device() -> DeviceConvs:
    return per_device(_DEVICES, DeviceConvs)


def check_conv(spec: dict[str, Any]) -> None:
    """Fail early when the launch's cuDNN convolution cannot run here."""
    library()
    if spec["library"] not in TYPES:
        raise CudnnError(f"no cuDNN convolution for {spec['library']}")


def prepare_conv(spec: dict[str, Any], args: Sequence[Any]) -> None:
    """Choose the launch's algorithm and size the workspace (before a graph
    capture, which may allocate nothing)."""
    state = _device()
    plan = state.plan(spec, args[0].shape, args[1].shape, args[2].shape)
    state.workspace.pointer(plan.workspace)


def run_conv(spec: dict[str, Any], args: Sequence[Any], stream_ptr: int) -> None:
    """The launch's convolution on the stream at `stream_ptr`."""
    _device().forward(spec, args, stream_ptr)
