"""The group-kind interface: everything fusec does differently per kind of
`fusion.group` (pointwise, reduction, contraction, window, attention,
layout), behind one protocol and one registry.

A kind says how two groups merge (or why they cannot), the resources a
merged summary and a scheduled kernel need, the candidate schedules for a
target, the schedule the model chooses and the kernel path that prices it,
and what `register-budget` may do with a group over the budget (a leaner
schedule, a split). Legality (`fusion_legality.py`), the scheduler
(`analysis/schedule_choice.py`), the autotuner's candidates, the register
model and `register-budget` ask the registry instead of switching on kind
strings. Writing a scheduled group is not the kind's: the writers of
`codegen/writers.py` do it, keyed by (backend, kind).

The protocol and the registry live here, in the low layer, so that legality
can use them; the built-in kinds are implemented in `fusec.scheduling.kinds`
(they need the schedulers above this layer), whose
`register_builtin_kinds` fills the registry. This layer cannot import that
one, so whoever builds the context for fusec programs calls it:
`compiler.parsing.make_context` (the driver, `fusec.compile`, the importers,
tests) and the `xdsl-opt` universe (`compiler/universe.py`). A lookup in an
empty registry is an internal error that says so; `register_kind` adds one
more kind (docs/writing-passes.md).

```python
from fusec.analysis.group_kind import group_kind
kind = group_kind("reduction", group)      # a located error for an unknown kind
attr, line, shared = kind.choose(ctx, group)
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import FusecError, InternalError, op_error
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects.schedule import ScheduleAttr

if TYPE_CHECKING:  # types only: these layers sit above this one
    from fusec.analysis.fusion_legality import Candidate, GroupInfo, Merged
    from fusec.analysis.scheduled_cost import ScheduledKernel
    from fusec.dialects.fusion import GroupOp
    from fusec.scheduling.contraction_schedule import GemmTile
    from fusec.scheduling.register_estimate import RegisterEstimate

BACKEND_ATTR = "backend"
"""The group attribute that names its backend (`backend = "library"`), set by
the pass that chose it (`group_backend` reads it)."""
NUMBA_BACKEND = "numba"
"""The backend of fusec's generated numba.cuda kernels (every group by default)."""
LIBRARY_BACKEND = "library"
"""The backend of vendor library calls (cuBLAS GEMMs, cuDNN convolutions)."""
GEMM_ATTR = "gemm"
"""The group attribute the GEMM choice records (`scheduling/gemm_choice.py`,
`gemm = "library"`): the library backend."""
MAX_REGISTERS_ATTR = "max_registers"
"""The group attribute `register-budget{max-registers=N}` records: cap the
group's kernels at N registers per thread (0 or absent: no cap)."""


def group_backend(group: GroupOp) -> str:
    """The backend `group` runs on, as recorded on it: its `backend`
    attribute (a pass set it), else "library" where the GEMM choice
    recorded a library call (`gemm = "library"`), else "numba"."""
    named = group.attributes.get(BACKEND_ATTR)
    if isinstance(named, StringAttr):
        return named.data
    if group.attributes.get(GEMM_ATTR) == StringAttr(LIBRARY_BACKEND):
        return LIBRARY_BACKEND
    return NUMBA_BACKEND

@dataclass
class ScheduleContext:
    """What choosing a schedule needs: the target, the shared memory a
    block may use (bytes), and where remarks about shrunk tiles go."""

    target: Target
    limit: int
    remarks: RemarkCollector


Choice = tuple["ScheduleAttr | None", str, int]
"""A chosen schedule (None: the kind has none), a readable line, and the
shared bytes per block it uses."""


@dataclass(frozen=True)
class Leaner:
    """Another schedule of the same group that needs fewer registers per
    thread: what `register-budget` records on the group (`schedule` under
    `SCHEDULE_KEY`, `estimate` as its `est_registers`) and says in its
    remark (`text`, e.g. "tile 64x64x8, 4x4 per thread")."""

    schedule: ScheduleAttr
    estimate: RegisterEstimate
    text: str


@runtime_checkable
class GroupKind(Protocol):
    """One kind of `fusion.group`. Implementations are stateless singletons
    registered with `register_kind`; every method is side-effect free
    except `choose`, which may add remarks to `ctx.remarks`."""

    name: str
    """The `kind` attribute of the groups it handles (and the legality
    summary's `GroupInfo.kind`)."""

    sized_for_budget: bool
    """Whether the pass that forms a group of this kind already sized its
    schedule for the register budget (attention: `fuse-attention`): over
    the budget, `register-budget` then neither splits nor caps it, it only
    says that ptxas may spill."""

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """Legality's kind algebra: `mine` (of this kind) and `other` as one
        group: (kind, iteration shape, reduced axes, anchor), or the reason
        they cannot be one kernel, or None when this kind has no rule for
        `other`'s kind (the other kind is asked next, then the pair is
        refused)."""
        ...

    def summary_registers(self, ops: tuple[Operation, ...], inputs: frozenset[SSAValue],
                          outputs: list[SSAValue], target: Target) -> int:
        """Legality's fast register estimate of a group holding `ops`."""
        ...

    def summary_shared(self, ops: tuple[Operation, ...], shape: tuple[int, ...],
                       parts: int) -> int:
        """Legality's shared bytes per block of a group holding `ops` over
        `shape`; `parts`: how many of the merged groups had this kind."""
        ...

    def kernel_path(self, info: GroupInfo) -> str:
        """The kernel a legality summary becomes (a key of
        `cost_model.KERNEL_PATHS`), as `choose` will schedule it."""
        ...

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """The model's schedule of `group` on `ctx.target` within
        `ctx.limit` bytes of shared memory, a readable line, its shared
        bytes; nothing is recorded on the group."""
        ...

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """Whether legality's `gain_ok` prices a group of this kind under the
        schedule `choose` would pick (`scheduled_kernel`, which costs a
        temporary group and a scheduling run) rather than its summary: true
        where the schedule changes threads, kernels or passes over memory in
        ways the summary cannot see."""
        ...

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """What `group` costs the machine under `attr` (the schedule
        `choose` picked, also recorded on `group`): threads launched,
        kernels and the `KERNEL_PATHS` key (legality's `gain_ok` prices it
        with the summary's bytes, flops and registers)."""
        ...

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """Alternatives to `first` (the model's choice) the autotuner may
        time, legal on `target` and within `limit` bytes of shared memory;
        unordered, duplicates allowed. Empty when there is nothing to vary."""
        ...

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """Registers per thread of `group`'s kernel under its schedule on
        `target` (`tile`: a GEMM tile to try instead)."""
        ...

    def leaner(self, group: GroupOp, budget: int, target: Target) -> Leaner | None:
        """`register-budget`: `group`'s kernel is over `budget` registers per
        thread on `target`; a schedule of the same group whose estimate
        fits (the kind's first, in its own order of preference), or None
        when it has none (the group is then split, capped or kept)."""
        ...

    def leanest(self, group: GroupOp, target: Target) -> Leaner | None:
        """`register-budget`: nothing fits the budget and `group` has no
        legal split point; the schedule with the fewest registers when it
        needs fewer than the group's own, else None (kept as it is)."""
        ...

    def may_cross_split(self, group: GroupOp, cross: list[SSAValue]) -> bool:
        """Whether `register-budget` may split `group` into two stages whose
        crossing values `cross` (results of the first stage read by the
        second) go through memory; legality of the two stages themselves
        is checked by the pass."""
        ...


_REGISTRY: dict[str, GroupKind] = {}


def register_kind(kind: GroupKind) -> GroupKind:
    """Add `kind` to the registry (a second kind of the same name is a bug)."""
    if not isinstance(kind, GroupKind):
        raise TypeError(f"{kind!r} does not implement the GroupKind protocol")
    if kind.name in _REGISTRY and _REGISTRY[kind.name] is not kind:
        raise ValueError(f"group kind {kind.name!r} is registered twice")
    _REGISTRY[kind.name] = kind
    return kind


def _require_kinds() -> None:
    # A lookup before anyone registered the built-in kinds would call every
    # group unknown; say what was missed instead.
    if not _REGISTRY:
        raise InternalError(
            "no group kind is registered: fusec.scheduling.kinds.register_builtin_kinds() "
            "registers the built-in ones (compiler.parsing.make_context calls it)")


def registered_kinds() -> dict[str, GroupKind]:
    """Every registered kind by name, in registration order."""
    _require_kinds()
    return dict(_REGISTRY)


def find_kind(name: str) -> GroupKind | None:
    """The kind called `name`, None when none is (legality's summaries also
    use kinds no emitter schedules: "view", "composite", ...)."""
    _require_kinds()
    return _REGISTRY.get(name)


def group_kind(name: str, where: Operation | None = None) -> GroupKind:
    """The kind called `name`; an unknown one is an error located at
    `where` (the group), or a `fusec: error:` without one."""
    kind = find_kind(name)
    if kind is not None:
        return kind
    message = (f"fusion.group has unknown kind \"{name}\" (expected one of "
               f"{', '.join(_REGISTRY)})")
    raise op_error(where, message) if where is not None else FusecError(message)


def kind_name(group: GroupOp) -> str:
    """The `kind` attribute of `group` ("" when it has none)."""
    return str(getattr(group.attributes.get("kind"), "data", ""))
