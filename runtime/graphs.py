"""CUDA-graph replay of a function's launches (CuPy stream capture).

After a model's first call (which compiles or links its kernels, uploads its
constants and creates cuBLAS's handle), the executor captures one call into
a CUDA graph: every numba kernel launch (on `cuda.external_stream` of the
capturing CuPy stream) and every library GEMM (CuPy, with temporaries from a
memory pool that belongs to the graph, so no later allocation can reuse
memory the graph writes). The graph reads *static input buffers* and writes
*static output buffers* owned by the executor. Each later call:

1. copies each input into its static buffer (one `cudaMemcpyAsync` each,
   from host or device memory alike),
2. launches the graph,
3. copies each output into a fresh array of the caller's kind (torch in,
   torch out) — or into NumPy, waiting for the stream, for host inputs.

All three run on the caller's current stream for torch and CuPy arrays (on
the legacy default stream otherwise), so results are ordered like any other
work of the caller and nothing waits on the host for device arrays. Copying
costs a few microseconds per input and output, much less than launching
kernels one by one; capturing again per input address would avoid the
copies but not the fresh outputs, and would keep one graph per address.
The static buffers are shared by all calls: calls issued concurrently from
different streams must not overlap (calls on one stream never do).

A capture that fails (a library call that cannot be captured, a driver
without support) is reported once and the model keeps launching kernels
one by one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fusec.compiler.diagnostics import FusecError
from fusec.runtime.arrays import array_kind, host_array, host_results, on_host

if TYPE_CHECKING:
    from fusec.runtime.executor import Executor

# cudaMemcpyDefault: the driver infers the direction from the pointers (UVA).
_MEMCPY_DEFAULT = 4


def capture_graph(executor: Executor) -> GraphRunner | None:
    """A `GraphRunner` for `executor` (after its first call), or None with
    a note on stderr when the capture fails."""
    import cupy

    try:
        return GraphRunner(cupy, executor)
    except Exception as err:
        print(f"fusec: note: CUDA graph capture of @{executor.fp.name} failed "
              f"({type(err).__name__}: {err}); launching its kernels one by one",
              file=sys.stderr)
        return None


class GraphRunner:
    """One captured graph with its static buffers; call it like the executor."""

    def __init__(self, cupy: Any, executor: Executor) -> None:
        self.cupy = cupy
        self.executor = executor
        fp = executor.fp
        self.in_specs = [(tuple(fp.values[v].shape), np.dtype(fp.values[v].dtype))
                         for v in fp.inputs]
        self.out_specs = [(tuple(fp.values[v].shape), np.dtype(fp.values[v].dtype))
                          for v in fp.outputs]
        self.static_in = [cupy.empty(shape, dtype) for shape, dtype in self.in_specs]
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = cupy.cuda.MemoryPool()  # temporaries of captured GEMMs, never shared
        self.in_ptrs = [int(a.data.ptr) for a in self.static_in]
        self.static_out, self.graph = self._capture()
        self.out_ptrs = [int(r.__cuda_array_interface__["data"][0]) for r in self.static_out]
        self.nbytes_in = [int(np.prod(s)) * d.itemsize for s, d in self.in_specs]
        self.nbytes_out = [int(np.prod(s)) * d.itemsize for s, d in self.out_specs]
        self._streams: dict[int, Any] = {}
        self._torch_dtypes: dict[np.dtype[Any], Any] = {}
        self.graph.upload(self.stream)
        self.stream.synchronize()

    def _capture(self) -> tuple[list[Any], Any]:
        """Bind the static buffers and capture one call's launches."""
        ex = self.executor
        cuda = ex.cuda
        stream = cuda.external_stream(self.stream.ptr)
        storage: dict[str, Any] = {}
        for value, a in zip(ex.fp.inputs, self.static_in, strict=True):
            storage[ex.roots[value]] = cuda.as_cuda_array(a, sync=False)
        for root, cls in ex.classes.items():
            if cls == "output" and root not in storage:
                spec = ex.fp.values[root]
                storage[root] = cuda.device_array(tuple(spec.shape), np.dtype(spec.dtype))
        ex._bound = None  # bind afresh: these buffers live as long as the graph
        calls, results = ex._bind(storage)
        ex._bound = None
        with self.cupy.cuda.using_allocator(self.pool.malloc), self.stream:
            self.stream.begin_capture()
            try:
                ex.enqueue(calls, stream)
            finally:
                graph = self.stream.end_capture()
        self._keep = (calls, storage)  # the views the graph's arguments point into
        return results, graph

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Copy in, replay, copy out (see the module's docstring)."""
        ex = self.executor
        if len(inputs) != len(self.in_specs):
            from fusec.runtime.executor import check_inputs

            check_inputs(ex.fp, inputs)
        kind = "numpy"
        for a in inputs:
            kind = array_kind(a)
            if kind != "numpy":
                break
        stream = self._stream_for(kind)
        memcpy = self.cupy.cuda.runtime.memcpyAsync
        keep = []
        for i, a in enumerate(inputs):
            ptr, held = self._source(i, a)
            keep.append(held)
            memcpy(self.in_ptrs[i], ptr, self.nbytes_in[i], _MEMCPY_DEFAULT, stream.ptr)
        self.graph.launch(stream)
        outs = [self._fresh(kind, shape, dtype) for shape, dtype in self.out_specs]
        for i, (_, ptr) in enumerate(outs):
            memcpy(ptr, self.out_ptrs[i], self.nbytes_out[i], _MEMCPY_DEFAULT, stream.ptr)
        arrays = [o for o, _ in outs]
        if on_host(kind):
            stream.synchronize()
            return host_results(kind, arrays)
        if kind == "cai":
            stream.synchronize()  # numba arrays carry no stream: finish before returning
        return arrays

    def _stream_for(self, kind: str) -> Any:
        """The caller's current CuPy stream for torch and CuPy arrays, else
        the legacy default stream (ordered after numba's blocking streams)."""
        cupy = self.cupy
        if kind == "cupy":
            return cupy.cuda.get_current_stream()
        if kind != "torch":
            return cupy.cuda.Stream.null
        ptr = int(sys.modules["torch"].cuda.current_stream().cuda_stream)
        if ptr not in self._streams:
            self._streams[ptr] = cupy.cuda.ExternalStream(ptr) if ptr else cupy.cuda.Stream.null
        return self._streams[ptr]

    def _source(self, i: int, a: Any) -> tuple[int, Any]:
        """The address of input `i`'s data (checked against the signature)
        and the object that keeps it alive until the copy is queued."""
        shape, dtype = self.in_specs[i]
        kind = array_kind(a)
        if on_host(kind):
            host = host_array(a, kind)
            if host.shape != shape or host.dtype != dtype:
                self._reject(i, a)
            return int(host.ctypes.data), host
        if kind == "torch":
            if tuple(a.shape) != shape or a.dtype is not self._torch_dtype(dtype) \
                    or not a.is_contiguous():
                self._reject(i, a)
            return int(a.data_ptr()), a
        if kind == "dlpack-cuda":
            a = self.cupy.from_dlpack(a)
            kind = "cupy"
        if kind == "cupy":
            if a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
                self._reject(i, a)
            return int(a.data.ptr), a
        iface = getattr(a, "__cuda_array_interface__", None)
        if not isinstance(iface, dict) or tuple(iface["shape"]) != shape \
                or np.dtype(iface["typestr"]) != dtype or iface.get("strides") not in (
                    None, _c_strides(shape, dtype)):
            self._reject(i, a)
        return int(iface["data"][0]), a

    def _reject(self, i: int, a: Any) -> None:
        """Raise the executor's error for input `i` (or a contiguity one)."""
        from fusec.runtime.executor import check_inputs

        fp = self.executor.fp
        stand_ins: list[Any] = [np.empty(s, d) for s, d in self.in_specs]
        stand_ins[i] = a
        check_inputs(fp, stand_ins)
        name = (fp.input_names or fp.inputs)[i]
        raise FusecError(f"input '{name}' of @{fp.name} must be C-contiguous (copy it first)")

    def _torch_dtype(self, dtype: np.dtype[Any]) -> Any:
        if dtype not in self._torch_dtypes:
            self._torch_dtypes[dtype] = getattr(sys.modules["torch"], dtype.name)
        return self._torch_dtypes[dtype]

    def _fresh(self, kind: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> tuple[Any, int]:
        """A new output array of the caller's kind and its address."""
        if on_host(kind):
            host = np.empty(shape, dtype)
            return host, int(host.ctypes.data)
        if kind == "torch":
            t = sys.modules["torch"].empty(shape, dtype=self._torch_dtype(dtype), device="cuda")
            return t, int(t.data_ptr())
        if kind in ("cupy", "dlpack-cuda"):
            c = self.cupy.empty(shape, dtype)
            return c, int(c.data.ptr)
        d = self.executor.cuda.device_array(shape, dtype)
        return d, int(d.__cuda_array_interface__["data"][0])


def _c_strides(shape: tuple[int, ...], dtype: np.dtype[Any]) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array."""
    strides, step = [], dtype.itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))
