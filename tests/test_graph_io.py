"""The Python side of graph replay on the CPU: per-input feeders (checked
before any conversion, resolved once per input type) and per-kind result
sinks, with stand-ins for the GPU arrays and streams."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import FunctionProgram, TensorSpec
from fusec.runtime import graph_inputs
from fusec.runtime.graph_inputs import InputFeed
from fusec.runtime.graph_outputs import ResultSink, torch_raw_stream

torch = pytest.importorskip("torch")


def _fp() -> FunctionProgram:
    return FunctionProgram(
        name="f", inputs=["v0", "v1"], outputs=["v2"],
        values={"v0": TensorSpec((2, 4), "float32"), "v1": TensorSpec((2, 4), "float32"),
                "v2": TensorSpec((2, 4), "float32")},
        launches=[], input_names=["x", "y"])


class _CudaTensor:
    """A torch CUDA tensor as the feeder sees one (its type lives in torch)."""

    __module__ = "torch.fake"

    def __init__(self, dtype: Any = None, shape: tuple[int, ...] = (2, 4),
                 contiguous: bool = True) -> None:
        self.dtype = dtype if dtype is not None else torch.float32
        self.shape = torch.Size(shape)
        self.is_cuda = True
        self._contiguous = contiguous
        self.calls: list[str] = []

    def is_contiguous(self) -> bool:
        self.calls.append("is_contiguous")
        return self._contiguous

    def data_ptr(self) -> int:
        self.calls.append("data_ptr")
        return 0x7F0000001000


class _Cai:
    """A device array known only by its CUDA array interface."""

    def __init__(self, strides: tuple[int, ...] | None = None) -> None:
        self.__cuda_array_interface__ = {"shape": (2, 4), "typestr": "<f4", "version": 3,
                                         "data": (0x7F0000002000, False), "strides": strides}


def test_numpy_is_read_in_place_and_copied_only_when_strided() -> None:
    feed = InputFeed(_fp(), 0)
    a = np.ones((2, 4), np.float32)
    kind, ptr, held = feed(a)
    assert (kind, ptr, held) == ("numpy", a.ctypes.data, a)
    t = np.ones((4, 2), np.float32).T
    kind, ptr, held = feed(t)
    assert ptr != t.ctypes.data and held.flags.c_contiguous and (held == t).all()
    with pytest.raises(FusecError, match="input 'x' of @f: expected dtype float32, got float64"):
        feed(np.ones((2, 4)))
    with pytest.raises(FusecError, match=r"expected shape \(2, 4\), got \(8\)"):
        feed(np.ones(8, np.float32))


def test_cpu_torch_is_checked_before_it_is_converted() -> None:
    feed = InputFeed(_fp(), 1)
    x = torch.arange(8, dtype=torch.float32).reshape(4, 2).t().requires_grad_(True)
    kind, ptr, held = feed(x.t().reshape(2, 4))  # a copy of a transposed view
    assert kind == "torch-cpu" and held.is_contiguous() and ptr == held.data_ptr()
    with pytest.raises(FusecError, match="input 'y' of @f: expected dtype float32, got bfloat16"):
        feed(torch.zeros((2, 4), dtype=torch.bfloat16))  # .numpy() would raise TypeError
    with pytest.raises(FusecError, match="expected shape"):
        feed(torch.zeros((4, 2)))


def test_cuda_tensor_costs_one_check_and_one_address_per_call(monkeypatch) -> None:
    kinds = []
    real = graph_inputs.array_kind
    monkeypatch.setattr(graph_inputs, "array_kind", lambda a: kinds.append(1) or real(a))
    feed = InputFeed(_fp(), 0)
    tensors = [_CudaTensor() for _ in range(50)]
    assert {feed(t)[:2] for t in tensors} == {("torch", 0x7F0000001000)}
    assert len(kinds) == 1  # the feeder was chosen once, for the type
    assert all(t.calls == ["is_contiguous", "data_ptr"] for t in tensors)
    with pytest.raises(FusecError, match="input 'x' of @f must be C-contiguous"):
        feed(_CudaTensor(contiguous=False))
    with pytest.raises(FusecError, match="expected dtype float32, got float64"):
        feed(_CudaTensor(dtype=torch.float64))


def test_cuda_array_interface_and_dlpack() -> None:
    feed = InputFeed(_fp(), 0)
    assert feed(_Cai())[:2] == ("cai", 0x7F0000002000)
    assert feed(_Cai(strides=(16, 4)))[:2] == ("cai", 0x7F0000002000)
    with pytest.raises(FusecError, match="must be C-contiguous"):
        feed(_Cai(strides=(4, 8)))

    class DLPackOnly:
        def __init__(self, a: np.ndarray) -> None:
            self._a, self.shape, self.dtype = a, a.shape, a.dtype

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self._a.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return self._a.__dlpack_device__()

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert feed(DLPackOnly(a))[:2] == ("dlpack-cpu", a.ctypes.data)
    with pytest.raises(FusecError, match="expected dtype float32, got int64"):
        feed(DLPackOnly(np.zeros((2, 4), np.int64)))


class _Stream:
    def __init__(self) -> None:
        self.synced = 0

    def synchronize(self) -> None:
        self.synced += 1


def test_host_sinks_allocate_the_callers_kind_and_wait() -> None:
    null = _Stream()
    cupy = SimpleNamespace(cuda=SimpleNamespace(Stream=SimpleNamespace(null=null)))
    specs = [((2, 4), np.dtype(np.float32)), ((3,), np.dtype(np.int64))]
    for kind, cls in (("numpy", np.ndarray), ("torch-cpu", torch.Tensor)):
        sink = ResultSink(kind, specs, cupy, None, 0)
        assert sink.stream() == (null, 0)
        outs = sink.fresh()
        assert [type(o) for o, _ in outs] == [cls, cls]
        assert [tuple(o.shape) for o, _ in outs] == [(2, 4), (3,)]
        ptrs = [o.ctypes.data if kind == "numpy" else o.data_ptr() for o, _ in outs]
        assert [p for _, p in outs] == ptrs
        assert sink.finish([o for o, _ in outs], null) == [o for o, _ in outs]
    assert null.synced == 2


def test_torch_stream_is_read_as_a_raw_pointer_without_a_stream_object() -> None:
    asked = []
    raw = SimpleNamespace(_cuda_getCurrentRawStream=lambda d: asked.append(d) or 0xABC)
    fake = SimpleNamespace(_C=raw)
    read = torch_raw_stream(fake, 3)
    assert read() == 0xABC and asked == [3]


def _bf16_fp() -> FunctionProgram:
    """bf16 in and out: the device holds uint16 bits."""
    return FunctionProgram(
        name="f", inputs=["v0"], outputs=["v1", "v2"],
        values={"v0": TensorSpec((2, 4), "uint16"), "v1": TensorSpec((2, 4), "uint16"),
                "v2": TensorSpec((2, 4), "float32")},
        launches=[], input_names=["x"])


class _RoundingCudaTensor(_CudaTensor):
    """A float32 CUDA tensor: torch rounds it into a new bfloat16 tensor."""

    __module__ = "torch.fake"

    def detach(self) -> _RoundingCudaTensor:
        self.calls.append("detach")
        return self

    def to(self, dtype: Any) -> _CudaTensor:
        self.calls.append(f"to {dtype}")
        return _CudaTensor(dtype=dtype)


def test_bf16_dtype_of_torch_results_and_inputs() -> None:
    from fusec.runtime.bf16_io import torch_dtype

    assert torch_dtype(torch, np.dtype(np.uint16)) is torch.bfloat16
    assert torch_dtype(torch, np.dtype(np.float32)) is torch.float32
    assert torch_dtype(torch, np.dtype(np.float16)) is torch.float16
    assert torch_dtype(torch, np.dtype(np.bool_)) is torch.bool


def test_bf16_numpy_inputs_are_rounded_or_taken_as_bits() -> None:
    from fusec.dialects.element_types import bf16_bits

    feed = InputFeed(_bf16_fp(), 0)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    kind, ptr, held = feed(x)
    assert kind == "numpy" and held.dtype == np.uint16 and ptr == held.ctypes.data
    np.testing.assert_array_equal(held, bf16_bits(x))
    bits = bf16_bits(x)
    assert feed(bits) == ("numpy", bits.ctypes.data, bits)  # bits in place
    with pytest.raises(FusecError, match="input 'x' of @f: expected bf16"):
        feed(np.ones((2, 4)))
    with pytest.raises(FusecError, match="expected shape"):
        feed(np.ones(8, np.float32))


def test_bf16_torch_inputs_are_their_bytes_or_rounded_by_torch() -> None:
    feed = InputFeed(_bf16_fp(), 0)
    t = _CudaTensor(dtype=torch.bfloat16)
    assert feed(t) == ("torch", 0x7F0000001000, t)  # read in place: no conversion
    assert t.calls == ["is_contiguous", "data_ptr"]
    f = _RoundingCudaTensor(dtype=torch.float32)
    kind, ptr, held = feed(f)
    assert (kind, ptr) == ("torch", 0x7F0000001000) and held.dtype is torch.bfloat16
    assert f.calls == ["detach", f"to {torch.bfloat16}"]
    x = torch.randn(2, 4)
    kind, ptr, held = feed(x)  # CPU float32: rounded by torch, copied in
    assert kind == "torch-cpu" and held.dtype is torch.bfloat16 and ptr == held.data_ptr()
    torch.testing.assert_close(held, x.to(torch.bfloat16), rtol=0, atol=0)
    b = x.to(torch.bfloat16)
    assert feed(b) == ("torch-cpu", b.data_ptr(), b)
    with pytest.raises(FusecError, match=r"expected bf16 .* got float64"):
        feed(_CudaTensor(dtype=torch.float64))
    with pytest.raises(FusecError, match="expected shape"):
        feed(_RoundingCudaTensor(dtype=torch.float32, shape=(4, 2)))


def test_bf16_float32_device_arrays_nothing_rounds_are_refused() -> None:
    feed = InputFeed(_bf16_fp(), 0)
    with pytest.raises(FusecError, match="input 'x' of @f is a float32 array on the GPU"):
        feed(_Cai())
    bits = _Cai()
    bits.__cuda_array_interface__["typestr"] = "<u2"
    assert feed(bits)[:2] == ("cai", 0x7F0000002000)


def test_bf16_results_are_torch_bfloat16_or_float32_values_on_the_host() -> None:
    from fusec.dialects.element_types import bf16_bits, round_to_bf16

    null = _Stream()
    cupy = SimpleNamespace(cuda=SimpleNamespace(Stream=SimpleNamespace(null=null)))
    specs = [((2, 4), np.dtype(np.uint16)), ((2, 4), np.dtype(np.float32))]
    sink = ResultSink("torch-cpu", specs, cupy, None, 0)
    outs = sink.fresh()
    assert [o.dtype for o, _ in outs] == [torch.bfloat16, torch.float32]
    assert [p for _, p in outs] == [o.data_ptr() for o, _ in outs]
    sink = ResultSink("numpy", specs, cupy, None, 0)
    (bits, ptr), (f32, _) = sink.fresh()
    assert bits.dtype == np.uint16 and ptr == bits.ctypes.data  # what the graph writes
    x = np.array([[1.0, -2.5, 3.0e38, 0.0], [np.inf, -0.0, 7.0, 1e-3]], np.float32)
    bits[...] = bf16_bits(x)
    got = sink.finish([bits, f32], null)
    assert got[0].dtype == np.float32 and got[1] is f32
    np.testing.assert_array_equal(got[0], round_to_bf16(x))
