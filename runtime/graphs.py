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

What does not change between calls is resolved once: per input position
and Python type, a feeder that checks the array and reads its address
(`graph_inputs.py`); per kind of caller, the stream reader and the output
allocators (`graph_outputs.py`). A call runs only those, the copies
(`cudaMemcpyAsync` on raw pointers) and `Graph.launch`.

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

from fusec.runtime.graph_inputs import InputFeed
from fusec.runtime.graph_outputs import ResultSink

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
        self.feeds = [InputFeed(fp, i) for i in range(len(fp.inputs))]
        self.device_id = int(cupy.cuda.Device().id)
        self._sinks: dict[str, ResultSink] = {}
        self._memcpy = cupy.cuda.runtime.memcpyAsync
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
        """Copy in, replay, copy out (see the module's docstring). Per input
        type and per kind of caller everything is resolved once
        (`graph_inputs.InputFeed`, `graph_outputs.ResultSink`): a call only
        checks each array, reads addresses and queues copies and the graph."""
        if len(inputs) != len(self.feeds):
            from fusec.runtime.executor import check_inputs

            check_inputs(self.executor.fp, inputs)
        kind = "numpy"
        fed = []
        for feed, a in zip(self.feeds, inputs, strict=True):
            k, ptr, held = feed(a)
            if kind == "numpy":
                kind = k
            fed.append((ptr, held))
        sink = self._sinks.get(kind)
        if sink is None:
            sink = self._sinks[kind] = ResultSink(kind, self.out_specs, self.cupy,
                                                  self.executor.cuda, self.device_id)
        stream, sptr = sink.stream()
        memcpy = self._memcpy
        for (ptr, _), dst, n in zip(fed, self.in_ptrs, self.nbytes_in, strict=True):
            memcpy(dst, ptr, n, _MEMCPY_DEFAULT, sptr)
        self.graph.launch(stream)
        outs = sink.fresh()
        for (_, ptr), src, n in zip(outs, self.out_ptrs, self.nbytes_out, strict=True):
            memcpy(ptr, src, n, _MEMCPY_DEFAULT, sptr)
        return sink.finish([o for o, _ in outs], stream)


