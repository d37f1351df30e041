"""CUDA-graph replay of a function's launches (CuPy stream capture), keyed
by the addresses of the caller's arrays.

After a model's first call (which compiles or links its kernels, uploads its
constants and creates cuBLAS's handle), every call replays a captured CUDA
graph: every numba kernel launch (on `cuda.external_stream` of the
capturing CuPy stream) and every library GEMM (cuBLAS on a handle of its
own, `runtime/library_gemm.py`). A graph bakes in the addresses it reads
and writes, so graphs are kept per address (`runtime/graph_cache.py`):

- an input already on the graph's GPU (torch CUDA, CuPy, numba, any CUDA
  array interface or DLPack GPU array) is read *in place*: the graph was
  captured for that address; a host input (NumPy, CPU torch, CPU DLPack)
  is copied into a static input buffer the graph reads;
- the outputs are fresh arrays of the caller's kind, allocated for each
  call; for GPU kinds the graph writes them directly (captured for their
  addresses: an output handed back is never written again, since every
  call writes only arrays allocated for it); host results, and outputs
  the program cannot write in place (an input or a constant returned,
  one value returned twice), are written to static output buffers and
  copied out.

In a loop like `y = model(x)` on device arrays, the caching allocators of
torch and CuPy hand back the same few addresses, so after a capture or
two each call is one graph launch and the output allocation: no copies.
Addresses that never repeat exhaust the capture budget and such calls
take the *static graph*, which copies every input and output (what every
call did before); see `graph_cache.py` for the LRU size, the budget and
what invalidates a graph.

bf16 values are uint16 bits on the device: a torch.bfloat16 CUDA input is
read in place as its bytes, float32 values are rounded on the way in, and a
torch caller's bf16 result is a torch.bfloat16 tensor the graph writes
(`graph_inputs.py`, `graph_outputs.py`).

What does not change between calls is resolved once: per input position
and Python type, a feeder that checks the array and reads its address
(`graph_inputs.py`); per kind of caller, the stream reader and the output
allocators (`graph_outputs.py`). Everything runs on the caller's current
stream for torch and CuPy arrays (the legacy default stream otherwise), so
results are ordered like any other work of the caller and nothing waits on
the host for device arrays. The static and intermediate buffers are shared
by all calls of a model: calls issued concurrently from *different*
streams must not overlap (calls on one stream never do).

Whether an address may be read or written in place (device or managed
memory of the graph's GPU) is asked of the driver once, when a graph is
captured for it; an array on another GPU is copied, as is one that does
not start on a 16-byte boundary (`runtime/array_alignment.py`). A capture that fails
(a library GEMM `cublas_direct.py` cannot express, a driver without
support) is reported once and the model launches its kernels one by one
from then on.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fusec.runtime.array_alignment import aligned_address
from fusec.runtime.graph_cache import GraphCache, GraphCachePolicy, Key
from fusec.runtime.graph_inputs import InputFeed
from fusec.runtime.graph_outputs import DEVICE_KINDS, ResultSink
from fusec.runtime.library_calls import gemm_calls, prepare_library_calls

if TYPE_CHECKING:
    from fusec.runtime.executor import Executor

# cudaMemcpyDefault: the driver infers the direction from the pointers (UVA).
_MEMCPY_DEFAULT = 4
# cudaMemoryTypeDevice, cudaMemoryTypeManaged: memory a kernel may address.
_KERNEL_MEMORY = (2, 3)

Spec = tuple[tuple[int, ...], np.dtype[Any]]


def capture_graph(executor: Executor, policy: GraphCachePolicy | None = None
                  ) -> GraphRunner | None:
    """A `GraphRunner` for `executor` (after its first call), or None with
    a note on stderr when CuPy cannot be set up for it."""
    import cupy

    try:
        return GraphRunner(cupy, executor, policy)
    except Exception as err:
        _note_failure(executor, err)
        return None


def _note_failure(executor: Executor, err: BaseException) -> None:
    print(f"fusec: note: CUDA graph capture of @{executor.fp.name} failed "
          f"({type(err).__name__}: {err}); launching its kernels one by one",
          file=sys.stderr)


@dataclass(frozen=True)
class Captured:
    """One captured graph: the input positions a call copies into static
    buffers first, and where the outputs are copied from afterwards (None:
    the graph wrote the call's output arrays itself)."""

    graph: Any
    copy_in: tuple[int, ...]
    copy_out: tuple[int, ...] | None
    copy_bytes: int = 0
    """What a replay copies in and out, in bytes."""


class GraphRunner:
    """The captured graphs of one executor; call it like the executor."""

    def __init__(self, cupy: Any, executor: Executor,
                 policy: GraphCachePolicy | None = None) -> None:
        self.cupy = cupy
        self.executor = executor
        fp = executor.fp
        self.in_specs: list[Spec] = [_spec(fp.values[v]) for v in fp.inputs]
        self.out_specs: list[Spec] = [_spec(fp.values[v]) for v in fp.outputs]
        self.nbytes_in = [_nbytes(s) for s in self.in_specs]
        self.nbytes_out = [_nbytes(s) for s in self.out_specs]
        self.feeds = [InputFeed(fp, i) for i in range(len(fp.inputs))]
        self.direct_ok = outputs_writable_in_place(executor)
        self.cache: GraphCache[Captured] = GraphCache(len(fp.inputs), policy)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.device_id = int(cupy.cuda.Device().id)
        self.static_in: list[Any] = [None] * len(fp.inputs)
        self.static_in_ptrs = [0] * len(fp.inputs)
        self._static_roots: dict[str, Any] = {}
        self._sinks: dict[str, ResultSink] = {}
        self._memcpy = cupy.cuda.runtime.memcpyAsync
        self._blas: Any = None

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Replay the graph for these arrays (see the module's docstring):
        check each input and read its address, allocate the outputs, look
        the graph up by those addresses, queue the copies a host array needs
        and the graph."""
        if len(inputs) != len(self.feeds):
            from fusec.runtime.executor import check_inputs

            check_inputs(self.executor.fp, inputs)
        kind = "numpy"
        # (lengths checked above: the zips need not check them again per call)
        fed = []  # (address, holder): a holder keeps a converted copy alive
        in_key: list[int | None] = []
        for feed, a in zip(self.feeds, inputs, strict=False):
            k, ptr, held = feed(a)
            if kind == "numpy":
                kind = k
            fed.append((ptr, held))
            in_key.append(ptr if k in DEVICE_KINDS else None)
        sink = self._sinks.get(kind)
        if sink is None:
            sink = self._sink(kind)
        stream, sptr = sink.stream()
        outs = sink.fresh()
        key = (tuple(in_key), tuple([p for _, p in outs]) if sink.in_place else None)
        entry = self.cache.get(key)
        if entry is None:
            try:
                entry = self._miss(key)
            except Exception as err:
                return self._give_up(err, inputs)
        counts = self.executor.counts
        counts.replays += 1
        if entry.copy_bytes:
            counts.copying_replays += 1
            counts.copied_bytes += entry.copy_bytes
        memcpy = self._memcpy
        for i in entry.copy_in:
            memcpy(self.static_in_ptrs[i], fed[i][0], self.nbytes_in[i], _MEMCPY_DEFAULT, sptr)
        entry.graph.launch(stream)
        if entry.copy_out is not None:
            for (_, dst), src, n in zip(outs, entry.copy_out, self.nbytes_out, strict=False):
                memcpy(dst, src, n, _MEMCPY_DEFAULT, sptr)
        return sink.finish([o for o, _ in outs], stream)

    def _sink(self, kind: str) -> ResultSink:
        """The result sink of `kind`, told whether the graph may write its
        arrays in place."""
        sink = self._sinks[kind] = ResultSink(kind, self.out_specs, self.cupy,
                                              self.executor.cuda, self.device_id)
        sink.in_place = sink.on_device and self.direct_ok
        return sink

    def _miss(self, key: Key) -> Captured:
        """Capture a graph for `key`'s addresses, or, past the capture
        budget, use the static graph (captured once)."""
        cache = self.cache
        if key != cache.static_key and cache.may_capture():
            ins = tuple(p if p is None or self._on_device(p) else None for p in key[0])
            outs = key[1]
            if outs is not None and not all(self._on_device(p) for p in outs):
                outs = None
            entry = self._capture(ins, outs)
            cache.put(key, entry)
            return entry
        if key != cache.static_key:
            cache.served_static()
        if cache.static is None:
            cache.put(cache.static_key, self._capture(cache.static_key[0], None))
        assert cache.static is not None
        return cache.static

    def _on_device(self, ptr: int) -> bool:
        """Whether a kernel of this graph may address `ptr` (device or
        managed memory of the graph's GPU, on the kernels' 16-byte boundary:
        `runtime/array_alignment.py`); else the array is copied."""
        if not aligned_address(ptr):
            return False
        try:
            attrs = self.cupy.cuda.runtime.pointerGetAttributes(ptr)
        except Exception:  # host memory the driver does not know, a stale address
            return False
        return int(attrs.type) in _KERNEL_MEMORY and int(attrs.device) == self.device_id

    def _capture(self, ins: tuple[int | None, ...], outs: tuple[int, ...] | None) -> Captured:
        """Bind the launches to these addresses (None: the static buffer)
        and capture them."""
        ex = self.executor
        storage: dict[str, Any] = {}
        for i, (value, ptr) in enumerate(zip(ex.fp.inputs, ins, strict=True)):
            addr = self._static_in(i) if ptr is None else ptr
            storage[ex.roots[value]] = self._device_array(addr, self.in_specs[i])
        if outs is None:
            storage.update(self._static_output_roots())
        else:
            for value, ptr in zip(ex.fp.outputs, outs, strict=True):
                root = ex.roots[value]
                storage[root] = self._device_array(ptr, _spec(ex.fp.values[root]))
        calls, results = ex._bind(storage, keep=False)
        graph = self._record(calls)
        copy_in = tuple(i for i, p in enumerate(ins) if p is None)
        copy_out = None if outs is not None else tuple(
            int(r.__cuda_array_interface__["data"][0]) for r in results)
        self.executor.counts.captures += 1
        copy_bytes = sum(self.nbytes_in[i] for i in copy_in) + (
            0 if copy_out is None else sum(self.nbytes_out))
        return Captured(graph, copy_in, copy_out, copy_bytes)

    def _record(self, calls: list[Any]) -> Any:
        """Capture `calls` on the runner's own stream; the graph instantiated
        and uploaded."""
        ex = self.executor
        stream = ex.cuda.external_stream(self.stream.ptr)
        blas = self._library_blas(calls, stream)
        prepare_library_calls(calls)  # a convolution's algorithm and workspace: not while capturing
        with self.stream:
            self.stream.begin_capture()
            try:
                ex.enqueue(calls, stream, blas)
            finally:
                graph = self.stream.end_capture()
        graph.upload(self.stream)
        self.stream.synchronize()
        return graph

    def _library_blas(self, calls: list[Any], stream: Any) -> Any:
        """The runner's direct cuBLAS handle when `calls` hold library GEMMs
        (None otherwise). Created once, it first runs each GEMM on scratch
        operands of the same shapes, outside any capture, against CuPy
        (`DirectCublas.verify`): cuBLAS's one-time set-up is not recorded,
        and a call that disagrees fails the capture instead of a result."""
        library = gemm_calls(calls)
        if not library:
            return None
        if self._blas is None:
            from fusec.runtime.cublas_direct import DirectCublas
            from fusec.runtime.library_gemm import stream_pointer

            blas = DirectCublas(self.cupy)
            for launch, _, args in library:
                blas.verify(launch.library, args[0].shape, args[1].shape,
                            stream_pointer(stream))
            self._blas = blas
        return self._blas

    def _static_in(self, i: int) -> int:
        """The address of static input buffer `i` (allocated on first use)."""
        if self.static_in[i] is None:
            shape, dtype = self.in_specs[i]
            self.static_in[i] = self.cupy.empty(shape, dtype)
            self.static_in_ptrs[i] = int(self.static_in[i].data.ptr)
        return self.static_in_ptrs[i]

    def _static_output_roots(self) -> dict[str, Any]:
        """The static output buffers (numba arrays, allocated once)."""
        ex = self.executor
        if not self._static_roots:
            for root, cls in ex.classes.items():
                if cls == "output":
                    shape, dtype = _spec(ex.fp.values[root])
                    self._static_roots[root] = ex.cuda.device_array(shape, dtype)
        return self._static_roots

    def _device_array(self, ptr: int, spec: Spec) -> Any:
        """A numba view of the C-contiguous array at `ptr` (owned elsewhere)."""
        shape, dtype = spec
        return self.executor.cuda.from_cuda_array_interface(
            {"shape": shape, "typestr": dtype.str, "data": (ptr, False), "version": 3,
             "strides": None}, owner=None, sync=False)

    def _give_up(self, err: BaseException, inputs: Sequence[Any]) -> list[Any]:
        """A capture failed: note it once, launch kernels one by one from now on."""
        ex = self.executor
        _note_failure(ex, err)
        ex.graph = None
        ex.graphs = False
        return ex(list(inputs))


def outputs_writable_in_place(executor: Executor) -> bool:
    """Whether a graph can write each output straight into an array of the
    caller: every output is computed by a kernel into a root of its own,
    of the output's size (reshape views only), not an input or a constant."""
    fp = executor.fp
    roots = [executor.roots[v] for v in fp.outputs]
    if len(set(roots)) != len(roots):
        return False
    return all(executor.classes.get(r) == "output"
               and fp.values[r].nbytes == fp.values[v].nbytes
               for r, v in zip(roots, fp.outputs, strict=True))


def _spec(t: Any) -> Spec:
    return tuple(int(d) for d in t.shape), np.dtype(t.dtype)


def _nbytes(spec: Spec) -> int:
    return int(np.prod(spec[0], dtype=np.int64)) * spec[1].itemsize
