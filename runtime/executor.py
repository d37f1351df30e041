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
   device if they are NumPy arrays;
4. constants are uploaded once per `Executor`; intermediates live in the
   buffers of the memory plan (`compiler/memory_plan.py`), allocated once as
   byte arrays and viewed with each value's dtype and shape; outputs get
   fresh arrays per call;
5. each launch gets contiguous views (`ArgSpec.view_shape`) of its values and
   runs as `kernel[grid, block, stream, shared_bytes](*args)`;
6. outputs come back as NumPy arrays when every input was NumPy, else as the
   kind of the first device input (numba, CuPy or PyTorch; CuPy and PyTorch
   are imported only when such an array was passed in).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from fusec.codegen.program import FunctionProgram, KernelLaunch, Program, TensorSpec
from fusec.compiler.diagnostics import FusecError
from fusec.compiler.memory_plan import MemoryPlan, plan_memory, storage_classes, view_roots
from fusec.runtime.device import cuda_module

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
    once per distinct text (numba compiles each kernel once per module)."""
    if path is not None:
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
    if path is not None:
        spec = importlib.util.spec_from_file_location(name, filename)
    else:
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


def _array_kind(a: Any) -> str:
    """"numpy", "torch", "cupy" or "numba" (any other device array)."""
    if isinstance(a, np.ndarray):
        return "numpy"
    module = type(a).__module__.split(".")[0]
    if module in ("torch", "cupy"):
        return module
    return "numba"


def _shape_dtype(a: Any) -> tuple[tuple[int, ...], np.dtype[Any] | None]:
    """Shape and dtype of a NumPy or device array (by its CUDA array
    interface when it has one: torch dtypes are not NumPy dtypes)."""
    iface = getattr(a, "__cuda_array_interface__", None)
    if isinstance(iface, dict):
        return tuple(int(d) for d in iface["shape"]), np.dtype(str(iface["typestr"]))
    shape = getattr(a, "shape", None)
    dtype = getattr(a, "dtype", None)
    if shape is None or dtype is None:
        return (), None
    try:
        return tuple(int(d) for d in shape), np.dtype(dtype)
    except TypeError:
        return tuple(int(d) for d in shape), None


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
        if not isinstance(a, np.ndarray) and not hasattr(a, "__cuda_array_interface__") \
                and _array_kind(a) == "numba" and not hasattr(a, "copy_to_host"):
            raise FusecError(
                f"input '{name}' of @{fp.name}: expected an array, got {type(a).__name__}"
            )
        shape, dtype = _shape_dtype(a)
        if shape != tuple(spec.shape):
            raise FusecError(
                f"input '{name}' of @{fp.name}: expected shape {_fmt(spec.shape)}, "
                f"got {_fmt(shape)}"
            )
        if dtype != np.dtype(spec.dtype):
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


@contextmanager
def _quiet_float_errors() -> Iterator[None]:
    """Silence NumPy's floating-point warnings while simulated kernels run:
    a GPU gives inf and NaN silently, and the simulator runs each thread in
    its own Python thread, where `np.errstate` of the caller does not reach
    (the warnings filter is process-wide)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", _FLOAT_ERROR_WARNING, RuntimeWarning)
        yield


def _device_pointer(a: Any) -> int:
    """The device address of an array (the key of a bound call)."""
    return int(a.__cuda_array_interface__["data"][0])


def _is_oom(err: BaseException) -> bool:
    text = f"{type(err).__name__} {err}".upper()
    return "OUT_OF_MEMORY" in text or "OUT OF MEMORY" in text


class Executor:
    """Runs one function of a program; keeps the kernels module, the
    uploaded constants and the pooled buffers between calls."""

    def __init__(
        self,
        program: Program,
        function: str,
        device: str = "sim",
        memory: MemoryPlan | None = None,
        kernels_path: str | Path | None = None,
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
        self.module = load_kernels(program.kernels_source if kernels_path is None else None,
                                   kernels_path)
        self.kernels = [self._kernel(launch) for launch in self.fp.launches]
        self.stream: Any = None
        self.constants: dict[str, Any] = {}
        self.buffers: list[Any] = []
        self._bound: tuple[Any, list[Any], list[Any]] | None = None

    def kernel_usage(self) -> GpuUsage:
        """Registers, local and static shared memory per kernel of the
        function, read from the driver (`fusec run --registers`). numba
        compiled each kernel at its first launch, and `dispatcher.compile`
        hands that variant back for the same argument types, so after a call
        nothing is compiled again. Only asked for: a normal call never pays."""
        if self.simulator:
            raise FusecError("kernel registers need a GPU: the simulator compiles no machine "
                             "code (for ptxas's counts compile with --ptx-info)")
        from fusec.codegen.gpu_registers import measure_kernels
        from fusec.codegen.ptx import launch_signature

        signatures = {la.kernel: launch_signature(la, self.fp.values)
                      for la in self.fp.launches if la.library is None}
        return measure_kernels(self.cuda, self.module, signatures)

    def _kernel(self, launch: KernelLaunch) -> Any:
        if launch.library:  # run by runtime/library_gemm.py, not a kernel of kernels.py
            from fusec.runtime.library_gemm import check_library

            check_library(launch)
            return None
        kernel = getattr(self.module, launch.kernel, None)
        if kernel is None:
            raise FusecError(
                f"kernels.py has no kernel '{launch.kernel}' (plan of @{self.fp.name})"
            )
        return kernel

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Run the function on `inputs`; outputs in the kind of the inputs."""
        check_inputs(self.fp, inputs)
        try:
            return self._run(inputs)
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
        results, storage = self.launch(inputs)
        return self._from_device(inputs, results, storage)

    def launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any] | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        """Enqueue every kernel on the stream and return without waiting.

        `outputs` (device arrays, one per function output that is computed by
        a kernel) are written in place instead of freshly allocated ones: the
        benchmark suite times repeated calls this way, so that neither
        allocation nor synchronisation is counted. Returns the output arrays
        (still being written) and the value storage.
        """
        cuda = self.cuda
        if self.stream is None:
            self.stream = cuda.stream()
        storage: dict[str, Any] = {}
        names = self.fp.input_names or self.fp.inputs
        for name, value, a in zip(names, self.fp.inputs, inputs, strict=True):
            storage[self.roots[value]] = self._to_device(a, name)
        given = iter(outputs or [])
        for root, cls in self.classes.items():
            if cls == "output" and root not in storage:
                spec = self.fp.values[root]
                out = next(given, None)
                storage[root] = out if out is not None else cuda.device_array(
                    spec.shape, dtype=np.dtype(spec.dtype), stream=self.stream)
        calls, results = self._bind(storage)
        with _quiet_float_errors() if self.simulator else nullcontext():
            for launch, kernel, args in calls:
                if kernel is None:
                    from fusec.runtime.library_gemm import run_library_call

                    run_library_call(launch, args, self.stream)
                    continue
                kernel(*args)
        return results, storage

    def _bind(self, storage: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """The (launch, configured kernel, argument views) of every launch and
        the output views, for the arrays in `storage`.

        Building device-array views costs tens of microseconds each in Python,
        more than a whole fused kernel runs, so the bound calls are kept for
        the last set of arrays (keyed by their device pointers): repeated
        calls on the same inputs and outputs only enqueue kernels."""
        key = None if self.simulator else tuple(
            (v, _device_pointer(a)) for v, a in storage.items())
        if key is not None and self._bound is not None and self._bound[0] == key:
            return self._bound[1], self._bound[2]
        storage = {**storage, **self._constants()}
        pooled = self._buffers()
        calls = []
        for launch, kernel in zip(self.fp.launches, self.kernels, strict=True):
            args = [self._view(storage, pooled, a.value).reshape(a.view_shape)
                    for a in launch.args]
            configured = None if kernel is None else kernel[
                launch.grid, launch.block, self.stream, launch.shared_bytes]
            calls.append((launch, configured, args))
        results = [self._view(storage, pooled, v) for v in self.fp.outputs]
        if key is not None:
            self._bound = (key, calls, results)
        return calls, results

    def _to_device(self, a: Any, name: str) -> Any:
        """A device array for input `name`: NumPy arrays are copied over;
        device arrays are used in place (as_cuda_array waits for the stream
        their producer named in the CUDA array interface)."""
        if isinstance(a, np.ndarray):
            return self.cuda.to_device(np.ascontiguousarray(a), stream=self.stream)
        if not self.simulator and hasattr(a, "__cuda_array_interface__"):
            a = self.cuda.as_cuda_array(a)
        is_contiguous = getattr(a, "is_c_contiguous", None)
        if callable(is_contiguous) and not is_contiguous():
            # Kernels index flat views of their arguments.
            raise FusecError(f"input '{name}' of @{self.fp.name} must be a C-contiguous "
                             "device array (copy it first)")
        return a

    def _constants(self) -> dict[str, Any]:
        """Device copies of the constants, uploaded on the first call only."""
        if not self.constants:
            for value, array in self.fp.constants.items():
                spec = self.fp.values[value]
                host = np.ascontiguousarray(array, dtype=np.dtype(spec.dtype)).reshape(spec.shape)
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

    def _from_device(self, inputs: Sequence[Any], results: list[Any],
                     storage: dict[str, Any]) -> list[Any]:
        device_inputs = [a for a in inputs if not isinstance(a, np.ndarray)]
        if not device_inputs:
            out = [r.copy_to_host(stream=self.stream) for r in results]
            self.stream.synchronize()
            return out
        self.stream.synchronize()
        kind = _array_kind(device_inputs[0])
        results = [self._own(r, v) for r, v in zip(results, self.fp.outputs, strict=True)]
        if kind == "cupy" and "cupy" in sys.modules:
            cupy = sys.modules["cupy"]
            return [cupy.asarray(r) for r in results]
        if kind == "torch" and "torch" in sys.modules:
            torch = sys.modules["torch"]
            return [torch.as_tensor(r, device="cuda") for r in results]
        return results

    def _own(self, array: Any, value: str) -> Any:
        """A returned input or constant is copied, so the caller can never
        write into our constants or see its input aliased."""
        if self.classes.get(self.roots.get(value, value)) == "output":
            return array
        copy = self.cuda.device_array(array.shape, dtype=array.dtype, stream=self.stream)
        copy.copy_to_device(array, stream=self.stream)
        self.stream.synchronize()
        return copy


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
