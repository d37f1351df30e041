"""Running a compiled `Program`: bind arrays to buffers, launch the kernels in
plan order on one stream, return the outputs.

```python
outputs = run_program(program, "f", [x, w])            # NumPy in, NumPy out
outputs = run_program(program, "f", [x_gpu], device="gpu")  # device arrays in and out
```

What happens on a call:

1. the device is chosen (`runtime/device.py`) before numba.cuda is imported;
2. `kernels.py` is loaded as a module through importlib (from its text, or
   from `OUT/kernels.py`), once per program; nothing else is executed;
3. the inputs are checked against the function's signature (count, shape,
   dtype; errors name the argument by its model name) and moved to the
   device if they live on the host (NumPy, CPU torch tensors, CPU DLPack;
   `runtime/arrays.py` lists the kinds accepted); a device array that does
   not start on a 16-byte boundary is copied (`runtime/array_alignment.py`);
4. on a GPU, each kernel is linked from kept PTX or compiled on all cores
   first (`runtime/kernel_loader.py`), once per `Executor`;
5. constants are uploaded once per `Executor`; intermediates live in the
   buffers of the memory plan (`analysis/memory_plan.py`), allocated once as
   byte arrays and viewed with each value's dtype and shape; outputs get
   fresh arrays per call;
6. each launch gets contiguous views (`ArgSpec.view_shape`) of its values and
   runs through `_Kernel.launch` (the simulator: its dispatcher), on the
   caller's torch or CuPy stream, else fusec's own;
7. outputs come back in the kind of the first input that is not NumPy
   (`runtime/arrays.py`);
8. on a GPU with CuPy, every later call replays a CUDA graph of the
   launches, captured for the addresses of the caller's device arrays (no
   copies) or for static buffers that host arrays are copied into
   (`runtime/graphs.py`, `runtime/graph_cache.py`).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.memory_plan import MemoryPlan, plan_memory, storage_classes, view_roots
from fusec.analysis.program import FunctionProgram, KernelLaunch, Program, TensorSpec
from fusec.codegen.wide_access import ARRAY_ALIGNMENT
from fusec.runtime import bf16_io
from fusec.runtime.array_alignment import address, aligned_address, aligned_array
from fusec.runtime.arrays import (
    array_kind,
    device_pointer,
    device_view,
    host_array,
    host_results,
    on_host,
    result_kind,
    wrap_results,
)
from fusec.runtime.bf16_io import BF16_INPUT_DTYPES, is_bf16
from fusec.runtime.device import cuda_module
from fusec.runtime.dynamic_shared import allow_launches
from fusec.runtime.graph_cache import CallCounts

if TYPE_CHECKING:
    from fusec.codegen.gpu_registers import GpuUsage


class _TextLoader(importlib.abc.SourceLoader):
    """Loads a module from source text held in memory, so `inspect` and
    tracebacks can still show the kernels' lines."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename

    def get_filename(self, fullname: str) -> str:
        return self.filename

    def get_data(self, path: str) -> bytes:
        return self.text.encode("utf-8")


_MODULES: dict[str, ModuleType] = {}


def load_kernels(source: str | None = None, path: str | Path | None = None) -> ModuleType:
    """The kernels module, from its text or from a `kernels.py` file; loaded
    once per distinct text (numba compiles each kernel once per module). With
    both, the text is used and `path` only names it (the text read_out checked
    against plan.json's digest, so the file is not read a second time)."""
    if path is not None and source is None:
        try:
            source = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise FusecError(f"cannot read kernels '{path}': {err}") from None
    if source is None:
        raise ValueError("load_kernels needs a source text or a path")
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    if digest in _MODULES:
        return _MODULES[digest]
    name = f"fusec_kernels_{digest}"
    filename = str(path) if path is not None else f"<fusec kernels {digest}>"
    spec = importlib.util.spec_from_loader(name, _TextLoader(source, filename))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        raise FusecError(f"cannot load kernels ({filename}): {type(err).__name__}: {err}") from None
    _MODULES[digest] = module
    return module


def _without_grad(a: Any) -> Any:
    """A torch tensor that requires grad, as a detached view (no copy): fusec
    computes no gradients, and torch refuses such a tensor's CUDA array
    interface. Anything else as it is."""
    return a.detach() if getattr(a, "requires_grad", False) is True else a


def _shape_dtype(a: Any) -> tuple[tuple[int, ...], np.dtype[Any] | str | None]:
    """Shape and dtype of an input, by its CUDA array interface when it has
    one; torch dtypes (`torch.float32`) are read by name, and a dtype NumPy
    does not know (bfloat16) is returned as its name."""
    try:
        iface = getattr(a, "__cuda_array_interface__", None)
    except (TypeError, RuntimeError):  # torch: none for bfloat16 (some versions), grad
        iface = None
    # A void typestr (`|V2`, torch's bfloat16 elsewhere) names no dtype; the array's does.
    if isinstance(iface, dict) and "V" not in str(iface["typestr"]):
        return tuple(int(d) for d in iface["shape"]), np.dtype(str(iface["typestr"]))
    shape = getattr(a, "shape", None)
    dtype = getattr(a, "dtype", None)
    if shape is None or dtype is None:
        return (), None
    dims = tuple(int(d) for d in shape)
    try:
        return dims, np.dtype(dtype)
    except TypeError:
        name = str(dtype).rsplit(".", 1)[-1]
        try:
            return dims, np.dtype(name)
        except TypeError:
            return dims, name


def check_inputs(fp: FunctionProgram, inputs: Sequence[Any]) -> None:
    """Raise a `FusecError` naming the argument for a wrong count, shape or dtype."""
    names = fp.input_names or fp.inputs
    if len(inputs) != len(fp.inputs):
        raise FusecError(
            f"@{fp.name} takes {len(fp.inputs)} input(s) ({', '.join(names)}), "
            f"got {len(inputs)}"
        )
    for i, (value, a) in enumerate(zip(fp.inputs, inputs, strict=True)):
        spec = fp.values[value]
        name = names[i]
        if array_kind(a) == "other" and not hasattr(a, "copy_to_host"):
            raise FusecError(
                f"input '{name}' of @{fp.name}: expected an array, got {type(a).__name__}"
            )
        shape, dtype = _shape_dtype(a)
        if shape != tuple(spec.shape):
            raise FusecError(
                f"input '{name}' of @{fp.name}: expected shape {_fmt(spec.shape)}, "
                f"got {_fmt(shape)}"
            )
        if is_bf16(spec.dtype):
            if dtype not in BF16_INPUT_DTYPES:
                raise FusecError(
                    f"input '{name}' of @{fp.name}: expected bf16 (a torch.bfloat16 tensor, "
                    f"float32 values or uint16 bit patterns), got {dtype}")
        elif dtype != np.dtype(spec.dtype):
            raise FusecError(
                f"input '{name}' of @{fp.name}: expected dtype {spec.dtype}, got {dtype}"
            )


def _fmt(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _simulating() -> bool:
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


# NumPy's floating-point warnings ("overflow encountered in scalar multiply").
_FLOAT_ERROR_WARNING = r"(overflow|invalid value|divide by zero|underflow) encountered"


def _is_oom(err: BaseException) -> bool:
    text = f"{type(err).__name__} {err}".upper()
    return "OUT_OF_MEMORY" in text or "OUT OF MEMORY" in text


@contextmanager
def _quiet_float_errors(simulator: bool) -> Iterator[None]:
    """In the simulator, kernels compute with NumPy scalars, which warn on
    overflow, 0/0 and the like; a GPU gives inf or NaN silently, and so must
    the simulator. Its threads do not inherit `np.errstate`, so the warnings
    are filtered (process-wide) instead, only while kernels run."""
    if not simulator:
        yield
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.filterwarnings("ignore", _FLOAT_ERROR_WARNING, RuntimeWarning)
        yield


class Executor:
    """Runs one function of a program; keeps the kernels, the uploaded
    constants, the pooled buffers and (on a GPU with CuPy) a captured CUDA
    graph between calls.

    `graphs`: None (the default) replays a graph from the second call on
    where a GPU and CuPy are present; False never does; True insists (an
    error without CuPy). `kernel_store` is a folder of kept PTX
    (`OUT/kernels`) read before the per-user cache."""

    def __init__(
        self,
        program: Program,
        function: str,
        device: str = "sim",
        memory: MemoryPlan | None = None,
        kernels_path: str | Path | None = None,
        graphs: bool | None = None,
        kernel_store: str | Path | None = None,
    ) -> None:
        if function not in program.functions:
            known = ", ".join(f"@{n}" for n in program.functions) or "none"
            raise FusecError(f"no function @{function} in the model (functions: {known})")
        self.cuda = cuda_module(device)
        self.simulator = _simulating()
        self.fp = program.functions[function]
        # A Program straight from code generation has no plan yet: plan it the
        # way the compile job does (the result is the same).
        self.memory = memory if memory is not None else plan_memory(self.fp)
        self.roots = view_roots(self.fp)
        self.classes = storage_classes(self.fp)
        # The text read_out checked against plan.json's digest: kernels.py is not read again.
        self.source = program.kernels_source
        self.module = load_kernels(program.kernels_source, kernels_path)
        self.dispatchers = [self._kernel(launch) for launch in self.fp.launches]
        # What each launch runs: numba's dispatchers in the simulator; on a GPU
        # `_Kernel`s from kept or freshly compiled PTX, resolved on first use.
        self.kernels: list[Any] = list(self.dispatchers) if self.simulator else []
        self.kernel_store = Path(kernel_store) if kernel_store is not None else None
        self.graphs = graph_choice(graphs, self.simulator)
        self.graph: Any = None
        self.counts = CallCounts()
        self.stream: Any = None
        self.constants: dict[str, Any] = {}
        self.buffers: list[Any] = []
        self._bound: tuple[Any, list[Any], list[Any]] | None = None
        self._streams: dict[int, Any] = {}

    def kernel_usage(self) -> GpuUsage:
        """Registers, local and static shared memory per kernel of the
        function, read from the driver (`fusec run --registers`). Each kernel
        was compiled (or linked from kept PTX) and registered with its
        dispatcher for the launch's argument types at the first call, and
        `dispatcher.compile` hands that variant back, so nothing is compiled
        again. Only asked for: a normal call never pays."""
        if self.simulator:
            raise FusecError("kernel registers need a GPU: the simulator compiles no machine "
                             "code (for ptxas's counts compile with --ptx-info)")
        from fusec.codegen.gpu_registers import measure_kernels
        from fusec.codegen.ptx import launch_signature

        self._resolve_kernels()
        signatures = {la.kernel: launch_signature(la, self.fp.values)
                      for la in self.fp.launches if la.library is None}
        return measure_kernels(self.cuda, self.module, signatures)

    def _kernel(self, launch: KernelLaunch) -> Any:
        if launch.library:  # run by runtime/library_calls.py, not a kernel of kernels.py
            from fusec.runtime.library_calls import check_library

            check_library(launch)
            return None
        kernel = getattr(self.module, launch.kernel, None)
        if kernel is None:
            raise FusecError(
                f"kernels.py has no kernel '{launch.kernel}' (plan of @{self.fp.name})"
            )
        return kernel

    def _resolve_kernels(self) -> None:
        """On a GPU: every kernel from kept PTX (OUT/kernels, then the
        per-user cache), the missing ones compiled on all cores first."""
        if self.kernels:
            return
        from fusec.codegen.ptx import launch_signature
        from fusec.runtime.kernel_loader import load_gpu_kernels

        signatures = {la.kernel: launch_signature(la, self.fp.values)
                      for la in self.fp.launches if la.library is None}
        loaded = load_gpu_kernels(self.cuda, self.module, self.source, signatures,
                                  self.kernel_store)
        self.kernels = [None if la.library is not None else loaded[la.kernel]
                        for la in self.fp.launches]
        allow_launches(self.fp.launches, self.kernels)  # launches past 48 KiB of dynamic

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Run the function on `inputs`; outputs in the kind of the inputs."""
        if self.graph is not None:
            return self.graph(inputs)
        inputs = [_without_grad(a) for a in inputs]
        check_inputs(self.fp, inputs)
        try:
            outputs = self._run(inputs)
            self.counts.one_by_one += 1
            if self.graphs and self.graph is None:
                from fusec.runtime.graphs import capture_graph

                self.graph = capture_graph(self)
                if self.graph is None:
                    self.graphs = False
            return outputs
        except FusecError:
            raise
        except Exception as err:
            if _is_oom(err):
                raise FusecError(
                    f"out of GPU memory running @{self.fp.name} "
                    f"(its buffers need {self.memory.total_bytes} bytes besides inputs, "
                    f"outputs and constants): {err}"
                ) from None
            if type(err).__name__ in ("CudaAPIError", "CudaDriverError", "CudaSupportError"):
                raise FusecError(f"CUDA error running @{self.fp.name}: {err}") from None
            raise

    def _run(self, inputs: Sequence[Any]) -> list[Any]:
        kind = result_kind(list(inputs))
        stream = self._stream_of(kind)
        results, _ = self.launch(inputs, stream=stream)
        return self._from_device(kind, results, stream)

    def _stream_of(self, kind: str) -> Any:
        """The numba stream a call runs on: the caller's current stream for
        torch and CuPy arrays (so results are ordered after the inputs'
        producers and before their consumers, without waiting on the host),
        else fusec's own."""
        if self.stream is None:
            self.stream = self.cuda.stream()
        if self.simulator or kind not in ("torch", "cupy"):
            return self.stream
        ptr = caller_stream_ptr(kind)
        if ptr not in self._streams:
            self._streams[ptr] = self.cuda.external_stream(ptr) if ptr \
                else self.cuda.default_stream()
        return self._streams[ptr]

    def launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any] | None = None,
        stream: Any = None,
    ) -> tuple[list[Any], dict[str, Any]]:
        """Enqueue every kernel on `stream` (default: fusec's own) and return
        without waiting.

        `outputs` (device arrays, one per function output that is computed by
        a kernel) are written in place instead of freshly allocated ones: the
        benchmark suite times repeated calls this way, so that neither
        allocation nor synchronisation is counted. Returns the output arrays
        (still being written) and the value storage.
        """
        if self.stream is None:
            self.stream = self.cuda.stream()
        stream = stream if stream is not None else self.stream
        calls, results, storage = self.bind_call(inputs, outputs, stream)
        self.enqueue(calls, stream)
        return results, storage

    def bind_call(self, inputs: Sequence[Any], outputs: Sequence[Any] | None, stream: Any
                  ) -> tuple[list[Any], list[Any], dict[str, Any]]:
        """What `launch` enqueues, bound to arrays but not enqueued: the
        (launch, kernel, argument views) of every launch, the output arrays
        and the value storage. Inputs on the host are copied over on
        `stream`. `enqueue(calls[i:i + 1], stream)` runs launch `i` alone,
        which is how `runtime/launch_timer.py` times each launch."""
        cuda = self.cuda
        if not self.simulator:
            self._resolve_kernels()
        storage: dict[str, Any] = {}
        names = self.fp.input_names or self.fp.inputs
        for name, value, a in zip(names, self.fp.inputs, inputs, strict=True):
            storage[self.roots[value]] = self._to_device(
                a, name, stream, is_bf16(self.fp.values[value].dtype))
        given = iter(outputs or [])
        for root, cls in self.classes.items():
            if cls == "output" and root not in storage:
                spec = self.fp.values[root]
                out = next(given, None)
                if out is not None and not aligned_address(address(out) or 0):
                    raise FusecError(f"an output array given to @{self.fp.name} must start on "
                                     f"a {ARRAY_ALIGNMENT}-byte boundary")
                storage[root] = out if out is not None else cuda.device_array(
                    spec.shape, dtype=np.dtype(spec.dtype), stream=stream)
        calls, results = self._bind(storage)
        return calls, results, storage

    def enqueue(self, calls: list[Any], stream: Any, blas: Any = None) -> None:
        """Launch bound `calls` on `stream`: library convolutions through
        cuDNN, library GEMMs through CuPy (or,
        given `blas`, through that `cublas_direct.DirectCublas`, which can
        be captured in a graph), the GPU's kernels straight through
        `_Kernel.launch` (no dispatcher look-up), the simulator's through
        their dispatchers."""
        core = None if self.simulator else core_stream(stream)
        with _quiet_float_errors(self.simulator):
            for launch, kernel, args in calls:
                if kernel is None:
                    from fusec.runtime.library_calls import run_library_call

                    run_library_call(launch, args, stream, blas)
                elif core is None:
                    kernel[launch.grid, launch.block, stream, launch.shared_bytes](*args)
                else:
                    kernel.launch(args, launch.grid, launch.block, core, launch.shared_bytes)

    def _bind(self, storage: dict[str, Any], keep: bool = True
              ) -> tuple[list[Any], list[Any]]:
        """The (launch, kernel, argument views) of every launch and the
        output views, for the arrays in `storage`.

        Building device-array views costs tens of microseconds each in Python,
        more than a whole fused kernel runs, so the bound calls are kept for
        the last set of arrays (keyed by their device pointers): repeated
        calls on the same inputs and outputs only enqueue kernels. A graph
        capture binds with `keep=False`: it needs the views once."""
        key = None if self.simulator or not keep else tuple(
            (v, device_pointer(a)) for v, a in storage.items())
        if key is not None and self._bound is not None and self._bound[0] == key:
            return self._bound[1], self._bound[2]
        storage = {**storage, **self._constants()}
        pooled = self._buffers()
        calls = []
        for launch, kernel in zip(self.fp.launches, self.kernels, strict=True):
            args = [self._view(storage, pooled, a.value).reshape(a.view_shape)
                    for a in launch.args]
            calls.append((launch, kernel, args))
        results = [self._view(storage, pooled, v) for v in self.fp.outputs]
        if key is not None:
            self._bound = (key, calls, results)
        return calls, results

    def _to_device(self, a: Any, name: str, stream: Any, bf16: bool = False) -> Any:
        """A device array for input `name`: host arrays (NumPy, CPU torch
        tensors, CPU DLPack) are copied over; device arrays are used in place
        (torch and CuPy arrays run on their own current stream, so nothing
        waits; other arrays wait for the stream their producer named in the
        CUDA array interface). A bf16 input (`bf16`) becomes its uint16 bits."""
        kind = array_kind(a)
        if on_host(kind):
            host = bf16_io.host_bits(a) if bf16 else host_array(a, kind)
            return self.cuda.to_device(host, stream=stream)
        a = device_view(bf16_io.device_bits(a) if bf16 else a, kind)
        if bf16 and _shape_dtype(a)[1] == np.dtype(np.float32):  # CuPy, numba: not rounded
            raise FusecError(f"input '{name}' of @{self.fp.name} {bf16_io.DEVICE_FLOAT32}")
        if not self.simulator and hasattr(a, "__cuda_array_interface__"):
            a = self.cuda.as_cuda_array(a, sync=needs_sync(kind, a, stream))
            a = bf16_io.as_uint16(a) if bf16 else a
        is_contiguous = getattr(a, "is_c_contiguous", None)
        if callable(is_contiguous) and not is_contiguous():
            # Kernels index flat views of their arguments.
            raise FusecError(f"input '{name}' of @{self.fp.name} must be a C-contiguous "
                             "device array (copy it first)")
        # Kernels access 16-byte words without testing addresses: a view
        # that starts at an odd element is copied (runtime/array_alignment.py).
        return aligned_array(self.cuda, a, stream)

    def _constants(self) -> dict[str, Any]:
        """Device copies of the constants, uploaded on the first call only."""
        if not self.constants:
            for value, array in self.fp.constants.items():
                spec = self.fp.values[value]
                host = bf16_io.host_bits(array).reshape(spec.shape) if is_bf16(spec.dtype) \
                    else np.ascontiguousarray(array, dtype=np.dtype(spec.dtype)).reshape(spec.shape)
                self.constants[value] = self.cuda.to_device(host, stream=self.stream)
        return self.constants

    def _buffers(self) -> list[Any]:
        """The pooled byte buffers, allocated on the first call only."""
        if not self.buffers and self.memory.buffers:
            self.buffers = [self.cuda.device_array(n, dtype=np.uint8, stream=self.stream)
                            for n in self.memory.buffers]
        return self.buffers

    def _view(self, storage: dict[str, Any], pooled: list[Any], value: str) -> Any:
        """`value` as a device array of its own shape and dtype."""
        spec: TensorSpec = self.fp.values[value]
        root = self.roots.get(value, value)
        if root in storage:
            base = storage[root]
        elif root in self.memory.assignment:
            buf = pooled[self.memory.assignment[root]]
            base = buf[: spec.nbytes].view(np.dtype(spec.dtype))
        else:
            raise FusecError(f"the plan of @{self.fp.name} gives value {value} no storage")
        return base.reshape(spec.shape)

    def _from_device(self, kind: str, results: list[Any], stream: Any) -> list[Any]:
        bf16 = [is_bf16(self.fp.values[v].dtype) for v in self.fp.outputs]
        if on_host(kind):
            out = [r.copy_to_host(stream=stream) for r in results]
            stream.synchronize()
            return [bf16_io.host_output(o, kind) if b else host_results(kind, [o])[0]
                    for o, b in zip(out, bf16, strict=True)]
        results = [self._own(r, v, stream) for r, v in zip(results, self.fp.outputs, strict=True)]
        if kind not in ("torch", "cupy"):
            stream.synchronize()  # numba arrays carry no stream: finish before returning
        return [bf16_io.device_output(r, kind) if b else wrap_results(kind, [r])[0]
                for r, b in zip(results, bf16, strict=True)]

    def _own(self, array: Any, value: str, stream: Any) -> Any:
        """A returned input or constant is copied, so the caller can never
        write into our constants or see its input aliased."""
        if self.classes.get(self.roots.get(value, value)) == "output":
            return array
        copy = self.cuda.device_array(array.shape, dtype=array.dtype, stream=stream)
        copy.copy_to_device(array, stream=stream)
        return copy


def needs_sync(kind: str, a: Any, stream: Any) -> bool:
    """Whether the host must wait for the stream that produced device array
    `a` (its CUDA array interface's `stream`) before kernels on `stream`
    read it. Not for torch and CuPy arrays (their current stream is the one
    the call runs on), nor for an array produced on `stream` itself, whose
    kernels run after its producer's anyway: waiting there would also wait
    for everything queued before, which serialises the host with the GPU on
    every call (the autotuner's whole-call timing enqueues calls behind a
    sleeping kernel and measured the host's time per call instead of the
    GPU's)."""
    if kind in ("torch", "cupy", "dlpack-cuda"):
        return False
    produced = a.__cuda_array_interface__.get("stream")
    if produced is None:
        return False
    from fusec.runtime.library_gemm import stream_pointer

    ours = stream_pointer(stream)
    return ours == 0 or int(produced) != ours


def core_stream(stream: Any) -> Any:
    """The cuda.core stream `_Kernel.launch` takes for a numba stream."""
    from numba.cuda.cudadrv.driver import _to_core_stream

    return _to_core_stream(stream)


def caller_stream_ptr(kind: str) -> int:
    """The caller's current stream (torch's or CuPy's) as a pointer."""
    if kind == "torch":
        return int(sys.modules["torch"].cuda.current_stream().cuda_stream)
    return int(sys.modules["cupy"].cuda.get_current_stream().ptr)


_GRAPH_NOTE_PRINTED = False


def graph_choice(graphs: bool | None, simulator: bool) -> bool:
    """Whether calls replay CUDA graphs: never in the simulator; otherwise
    as asked, by default when CuPy (which captures them) is installed, with
    a one-time note saying why not."""
    global _GRAPH_NOTE_PRINTED
    if graphs is False or simulator:
        return False
    try:
        import cupy  # noqa: F401
    except ImportError:
        if graphs:
            raise FusecError("graphs=True needs CuPy to capture CUDA graphs: install cupy "
                             "(pip install cupy-cuda12x) or pass graphs=False") from None
        if not _GRAPH_NOTE_PRINTED:
            print("fusec: note: CUDA graphs are off because CuPy is not installed "
                  "(pip install cupy-cuda12x); each call launches its kernels one by one",
                  file=sys.stderr)
            _GRAPH_NOTE_PRINTED = True
        return False
    return True


def run_program(
    program: Program,
    function: str,
    inputs: list[np.ndarray],
    device: str = "sim",
    memory: MemoryPlan | None = None,
) -> list[np.ndarray]:
    """Run `function` of `program` once on `inputs` (NumPy arrays or device
    arrays) and return its outputs in the same kind; `memory` is the plan
    stored in plan.json (planned here when omitted)."""
    return Executor(program, function, device, memory)(inputs)
