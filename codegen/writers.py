"""Code writers: what turns one scheduled `fusion.group` into what runs it,
keyed by (backend, kind) in one registry.

A *backend* is one way to run a group. Two are built in:

- "numba": fusec's own kernels, numba.cuda source in kernels.py, one writer
  per group kind (`codegen/pointwise.py`, `reduction.py`, `contraction.py`,
  `window.py`, `attention.py`, `layout.py`);
- "library": a vendor library call instead of a kernel (cuBLAS or cuBLASLt
  for a contraction group the GEMM choice marked `gemm = "library"`,
  `codegen/library_gemm.py`; cuDNN for a window group the convolution
  choice marked `backend = "library"`, `codegen/library_conv.py`), a launch
  of plan.json the runtime runs.

`group_backend` says which backend a group uses, from what the passes
recorded on it; `writer_for` finds the writer of its (backend, kind);
`generate.py` writes every group through it, and the register probe
(`codegen/kernel_probe.py`) the group it counts. The built-in writers
(`codegen/builtin_writers.py`) are registered on the first lookup;
`register_writer` adds one more (docs/adding-a-backend.md).

```python
from fusec.codegen.writers import WriteTask, writer_for
with group_plan(group, target) as plan:   # scheduling/group_plan.py
    written = writer_for(group).write(WriteTask(plan, "f_g0_exp", "g0", value_id, target))
# a KernelSource (generated source) or a KernelLaunch (a library call)
```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import InternalError
from fusec.analysis.group_kind import (
    LIBRARY_BACKEND,
    NUMBA_BACKEND,
    find_kind,
    group_backend,
    group_kind,
    kind_name,
)
from fusec.analysis.program import KernelLaunch
from fusec.analysis.targets import Target
from fusec.codegen.kernel_source import KernelSource
from fusec.dialects.fusion import GroupOp
from fusec.scheduling.group_plan import GroupPlan

NUMBA = NUMBA_BACKEND
"""The backend of fusec's generated numba.cuda kernels (every group by default)."""
LIBRARY = LIBRARY_BACKEND
"""The backend of vendor library calls (a GEMM the GEMM choice gave cuBLAS,
a convolution the convolution choice gave cuDNN)."""

ValueId = Callable[[SSAValue, Operation | None], str]
"""The id plan.json gives a value (`v3`), assigned on first sight; an
unsupported element type is reported at the operation given."""

Emit = Callable[[GroupPlan, str, Target], KernelSource]
"""A numba emitter: (group plan, kernel name, target) -> its kernel."""

Written = KernelSource | KernelLaunch
"""What a writer returns: a generated kernel (`KernelSource`: its source goes
into kernels.py, code generation fits its grid, caps its registers and
launches it, after its `before` kernels) or a finished launch that runs no
kernel of kernels.py (`KernelLaunch` with `library` set: a library call)."""


@dataclass(frozen=True)
class WriteTask:
    """What a writer gets for one scheduled group."""

    plan: GroupPlan
    """The group's plan (`scheduling/group_plan.py`): its schedule and every
    decision derived from it; the writer writes exactly that plan, it never
    plans."""
    kernel_name: str
    """The name of its generated kernel, unique in kernels.py (a split kernel
    of a reduction or attention may add `_partials` to it)."""
    group_name: str
    """The group's `name` (`g3`), for plan.json's `group`."""
    value_id: ValueId
    """Plan ids of the group's operands and results, for a writer that
    names them itself (a library call's `a`, `b`, `c`)."""
    target: Target
    """The target the group's schedule was chosen for (its limits)."""

    @property
    def group(self) -> GroupOp:
        """The group of the IR (its attributes, its location for errors)."""
        return self.plan.group


@runtime_checkable
class Writer(Protocol):
    """Turns a scheduled group of one kind into what runs it on one backend.
    Implementations are stateless, registered once with `register_writer`."""

    backend: str
    """The backend it writes for (`group_backend`'s answer)."""
    kind: str
    """The group kind it writes (the group's `kind` attribute)."""

    def write(self, task: WriteTask) -> Written:
        """The kernel or the library launch of `task.group`. A gap the writer
        documents (an op or a shape it has no code for) is a
        `NotImplementedError`, which code generation reports at the group;
        bad input is an `op_error` at the op."""
        ...


@dataclass(frozen=True)
class NumbaWriter:
    """A "numba" writer for the kind `kind`: `emit(group, kernel_name,
    target)`, the kind's emitter, writes the kernel's source."""

    kind: str
    emit: Emit
    backend: str = NUMBA

    def write(self, task: WriteTask) -> Written:
        """The emitter's kernel, named `task.kernel_name`."""
        return self.emit(task.plan, task.kernel_name, task.target)


def ignoring_target(emit: Callable[[GroupPlan, str], KernelSource]) -> Emit:
    """An emitter whose kernels read no target fact, as a `NumbaWriter`'s."""
    return lambda plan, kernel_name, _target: emit(plan, kernel_name)


_REGISTRY: dict[tuple[str, str], Writer] = {}
_BUILTIN = [False]  # whether the built-in writers were registered


def _with_builtin() -> dict[tuple[str, str], Writer]:
    # The built-in writers import every emitter; they are registered on the
    # first use of the registry, not when this module is imported.
    if not _BUILTIN[0]:
        _BUILTIN[0] = True
        from fusec.codegen.builtin_writers import register_builtin_writers

        register_builtin_writers()
    return _REGISTRY


def register_writer(writer: Writer) -> Writer:
    """Add `writer` for its (backend, kind); a second writer for a pair
    already taken is a bug."""
    if not isinstance(writer, Writer):
        raise TypeError(f"{writer!r} does not implement the Writer protocol")
    registry = _with_builtin()
    key = (writer.backend, writer.kind)
    if key in registry and registry[key] is not writer:
        raise ValueError(f"a writer for backend {key[0]!r} and kind {key[1]!r} is "
                         "registered twice")
    registry[key] = writer
    return writer


def registered_writers() -> dict[tuple[str, str], Writer]:
    """Every registered writer by (backend, kind), in registration order."""
    return dict(_with_builtin())


def writer_for(group: GroupOp) -> Writer:
    """The writer of `group`'s (backend, kind). A kind no one registered is
    an error at the group (a program may name any kind); a known kind with
    no writer on the group's backend is an internal error naming the pair."""
    backend, kind = group_backend(group), kind_name(group)
    registry = _with_builtin()
    writer = registry.get((backend, kind))
    if writer is not None:
        return writer
    if find_kind(kind) is None:
        group_kind(kind, group)  # raises: the located unknown-kind error
    name = group.attributes.get("name")
    label = f"group {name.data}" if isinstance(name, StringAttr) else "a group"
    pairs = ", ".join(f"{b}/{k}" for b, k in registry)
    raise InternalError(f"no writer for backend \"{backend}\" and kind \"{kind}\" ({label}); "
                        f"registered: {pairs} (fusec.codegen.writers.register_writer adds "
                        "one)")
