"""The Python API's callable model: what `fusec.compile(...)`
(`compiler/python_api.py`) and `fusec.load_out(OUT)` return.

```python
import fusec
model = fusec.compile("examples/chain16.mlir")      # or the model's text
y = model(x)                # NumPy in, NumPy out; one output -> one array
y = model(x=x)              # by argument name
model.launches              # kernel launches per call
model.plan                  # plan.json, as a dict
model.function("other")     # another entry function of the module
model = fusec.compile(path, graphs=False)  # launch kernels one by one on every call
```

`load_out(OUT)` gives the same object for a directory `fusec MODEL -o OUT`
wrote (plan.json + kernels.py + constants.npz; nothing is recompiled).
The device ("auto", "gpu", "sim") is chosen when the model is created, before
numba.cuda is imported; kernels are loaded and compiled on the first call.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.memory_plan import MemoryPlan
from fusec.analysis.program import FunctionProgram, Program
from fusec.runtime.device import select_device
from fusec.runtime.executor import Executor
from fusec.runtime.graph_cache import CallCounts
from fusec.runtime.plan_loading import program_from_plan


class CompiledModel:
    """A compiled module bound to one of its functions; call it like a function."""

    def __init__(
        self,
        program: Program,
        memory: dict[str, MemoryPlan],
        plan: dict[str, Any],
        device: str = "auto",
        function: str | None = None,
        kernels_path: Path | None = None,
        graphs: bool | None = None,
    ) -> None:
        if not program.functions:
            raise FusecError("the model has no function to run")
        if function is not None and function not in program.functions:
            known = ", ".join(f"@{n}" for n in program.functions)
            raise FusecError(f"no function @{function} in the model (functions: {known})")
        self.program = program
        self.memory = memory
        self.plan = plan
        self.device = select_device(device)
        self.name = function if function is not None else next(iter(program.functions))
        self.kernels_path = kernels_path
        self.graphs = graphs
        self._executor: Executor | None = None
        self._siblings: dict[str, CompiledModel] = {self.name: self}

    def start_kernel_builds(self) -> int:
        """On a GPU, ask the build workers for every kernel of the model now
        (`kernel_build.start_builds`), so that they compile while the caller
        goes on (a `torch.compile` graph's next partition, its own tracing)
        and the first call waits only for what is left; 0 (nothing asked)
        in the simulator or where OUT keeps the kernels' code."""
        if self.device != "gpu" or self.kernels_path is not None:
            return 0
        from fusec.codegen.ptx import program_signatures
        from fusec.runtime.device import cuda_module
        from fusec.runtime.kernel_build import device_cc, start_builds

        return start_builds(self.program.kernels_source, program_signatures(self.program),
                            device_cc(cuda_module("gpu")))

    @property
    def functions(self) -> list[str]:
        """The entry functions of the module."""
        return list(self.program.functions)

    @property
    def signature(self) -> FunctionProgram:
        """The bound function's program (inputs, outputs, launches)."""
        return self.program.functions[self.name]

    @property
    def launches(self) -> int:
        """Kernel launches per call of the bound function."""
        return len(self.signature.launches)

    @property
    def input_names(self) -> list[str]:
        """Argument names, in order: the keywords `model(**named)` takes."""
        fp = self.signature
        return list(fp.input_names or fp.inputs)

    def function(self, name: str) -> CompiledModel:
        """The model bound to entry function `name` (shares kernels and plan)."""
        if name not in self._siblings:
            sibling = CompiledModel(self.program, self.memory, self.plan, self.device, name,
                                    self.kernels_path, self.graphs)
            sibling._siblings = self._siblings
            self._siblings[name] = sibling
        return self._siblings[name]

    @property
    def executor(self) -> Executor:
        """The executor of the bound function (kernels loaded on first use);
        `executor.launch(inputs, outputs)` enqueues one call without waiting."""
        if self._executor is None:
            store = None
            if self.kernels_path is not None:  # an OUT: its kept kernels, if still intact
                from fusec.runtime.out_dir import kept_kernels

                store = kept_kernels(self.kernels_path.parent, self.plan)
            self._executor = Executor(self.program, self.name, self.device,
                                      self.memory.get(self.name), self.kernels_path,
                                      self.graphs, store)
        return self._executor

    def call_counts(self) -> CallCounts:
        """How this function's calls ran so far (a copy): launched one by
        one or replayed as a CUDA graph, and what the replays copied
        (`runtime/graph_cache.CallCounts`); all zero before the first call."""
        ex = self._executor
        return replace(ex.counts) if ex is not None else CallCounts()

    def __call__(self, *arrays: Any, **named: Any) -> Any:
        """Run once; a single output comes back as one array, several as a tuple."""
        ex = self._executor
        if ex is not None and ex.graph is not None and not named:
            outputs = ex.graph(arrays)  # the replay path: nothing else to look up
        else:
            outputs = self.executor(self._gather(arrays, named))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _gather(self, arrays: tuple[Any, ...], named: dict[str, Any]) -> list[Any]:
        if not named:
            return list(arrays)
        if arrays:
            raise FusecError(f"@{self.name}: pass inputs by position or by name, not both")
        names = self.input_names
        unknown = [k for k in named if k not in names]
        if unknown:
            raise FusecError(f"@{self.name} has no argument '{unknown[0]}' "
                             f"(its arguments: {', '.join(names)})")
        missing = [n for n in names if n not in named]
        if missing:
            raise FusecError(f"@{self.name}: missing input '{missing[0]}'")
        return [named[n] for n in names]

    def __repr__(self) -> str:
        return (f"<fusec CompiledModel @{self.name}: {len(self.input_names)} input(s), "
                f"{self.launches} launch(es), device {self.device}>")


def read_out(out_dir: str | Path, trust_modified_kernels: bool = False
             ) -> tuple[Program, dict[str, MemoryPlan], dict[str, Any]]:
    """The program, memory plans and plan.json of an OUT directory; a missing,
    corrupt or altered file is a `FusecError` naming it (`runtime/out_dir.py`).
    Unless `trust_modified_kernels`, OUT must be as this user's fusec wrote
    it: kernels.py matching plan.json's digest, and the whole OUT carrying
    the signature of the user's key (`runtime/out_signature.py`)."""
    from fusec.runtime.out_dir import (
        check_written_by_user,
        decode_kernels,
        read_constants,
        read_out_file,
        read_plan,
    )

    out = Path(out_dir)
    if not out.is_dir():
        raise FusecError(f"'{out_dir}' is not a directory written by 'fusec MODEL -o OUT'")
    plan = read_plan(out)
    kernels = read_out_file(out, plan["kernels"])
    constants = read_out_file(out, plan["constants_file"])
    source = decode_kernels(out, plan, kernels)
    arrays = read_constants(out, plan, constants)  # a damaged file is named first
    if not trust_modified_kernels:
        check_written_by_user(out, plan, kernels, constants)
    program, memory = program_from_plan(plan, source, arrays)
    return program, memory, plan


def load_out(out_dir: str | Path, device: str = "auto", function: str | None = None,
             graphs: bool | None = None,
             trust_modified_kernels: bool = False) -> CompiledModel:
    """A callable model from an OUT directory (nothing is recompiled; on a
    GPU, kernels kept in OUT/kernels or the per-user cache are linked
    instead of JIT-compiled). An OUT this user's fusec did not write (another
    user's, or one edited after compiling) is refused unless
    `trust_modified_kernels=True` (`fusec run --trust-modified-kernels`)."""
    select_device(device)
    program, memory, plan = read_out(out_dir, trust_modified_kernels)
    return CompiledModel(program, memory, plan, device, function, Path(out_dir) / "kernels.py",
                         graphs)
