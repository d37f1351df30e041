"""Each planner runs once per group: a planner's result is decided once, recorded
(on the group, as its `schedule` is), and read back, never re-derived.

The test compiles small programs through the real pipeline with a counter
around every planner entry point (`PLANNERS`, and each kind's `choose`),
attributes each call to the group it plans (a detached copy, such as the
decomposed or collapsed group a planner reads, counts for the group it was
made from), and checks the counts per group of the final program:

- from `tile-and-promote` on (scheduling, then code generation) each planner
  runs at most once per final group (`AFTER_BOUND`);
- the passes before it (fusion's legality, `register-budget`) run each at
  most once per final group too (`BEFORE_BOUND`): an answer is kept while
  the group it was asked for stays as it is.

Legality's trial groups (`analysis/fusion_legality.py` prices temporary merged
groups, and `register-budget` its split halves) are groups of their own that
never reach the final program: the kinds' `choose`, the row analysis and
schedule (`reduction_plan.analyze`, `reduction_schedule.plan_schedule`), the
window plan (`window_schedule.group_window`) and the register model
legitimately run for them too, and they are not counted against any final
group. `resolve_target` plans no group: it runs once per pass that carries a
target and once for the compile job (`RESOLVES_PER_COMPILE`), none during
code generation.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from test_report_counts import ONE_KERNEL, TWO_KERNELS
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusec.analysis import decompose_group
from fusec.analysis.group_body import GroupBody
from fusec.compiler.compile import compile_model
from fusec.compiler.instrument import Instrumentation
from fusec.dialects.fusion import GroupOp
from fusec.scheduling import kinds, layout_collapse

# One group each, then a few of two or three groups.
PROGRAMS = {
    "softmax": """
func.func @f(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %s = nn.softmax %x {axis = -1} : tensor<4x32xf32>
  func.return %s : tensor<4x32xf32>
}""",
    "layer_norm": """
func.func @f(%x: tensor<4x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %y = nn.layer_norm %x, %g, %b {axis = -1, epsilon = 1.0e-05}
      : (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  func.return %y : tensor<4x32xf32>
}""",
    "matmul_bias_gelu": """
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) -> tensor<8x8xf32> {
  %m = nn.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %s = nn.add %m, %b : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %y = nn.gelu %s {approximate = "tanh"} : tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}""",
    "conv_relu": """
func.func @f(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32> {
  %c = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}
      : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32>
  %r = nn.relu %c : tensor<1x8x8x8xf32>
  func.return %r : tensor<1x8x8x8xf32>
}""",
    "attention": """
func.func @f(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>)
    -> tensor<1x2x16x8xf32> {
  %t = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<1x2x16x8xf32>) -> tensor<1x2x8x16xf32>
  %s = nn.matmul %q, %t : (tensor<1x2x16x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x16x16xf32>
  %c = nn.constant dense<0.35355339> : tensor<f32>
  %m = nn.mul %s, %c : (tensor<1x2x16x16xf32>, tensor<f32>) -> tensor<1x2x16x16xf32>
  %p = nn.softmax %m {axis = -1} : tensor<1x2x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<1x2x16x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  func.return %o : tensor<1x2x16x8xf32>
}""",
    "transpose_add": """
func.func @f(%x: tensor<32x64xf32>, %y: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  %s = nn.add %t, %y : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  func.return %s : tensor<64x32xf32>
}""",
    "add_relu": ONE_KERNEL,
    # A reduction of a reduction's result through a transpose: several groups.
    "two_reductions": TWO_KERNELS,
    "matmul_softmax": """
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %m = nn.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = nn.softmax %m {axis = -1} : tensor<8x32xf32>
  func.return %s : tensor<8x32xf32>
}""",
}

# Planner entry points: (module, function). Every module that imported the
# function by name gets the counted one too.
PLANNERS = (
    ("fusec.scheduling.reduction_plan", "analyze"),
    ("fusec.scheduling.reduction_schedule", "plan_schedule"),
    ("fusec.scheduling.gemm_shape", "analyze"),
    ("fusec.scheduling.pointwise_plan", "plan_group"),
    ("fusec.scheduling.transposed_plan", "plan_group"),
    ("fusec.scheduling.window_schedule", "group_window"),
    ("fusec.scheduling.attention_group", "group_tile"),
    ("fusec.scheduling.register_model", "decide_registers"),
    ("fusec.analysis.schedule_choice", "decide_schedule"),
    # each group's plan and its kind's detail planner (`scheduling/group_plan.py`)
    ("fusec.scheduling.group_plan", "group_plan"),
    ("fusec.scheduling.row_plan", "plan_rows"),
    ("fusec.scheduling.gemm_plan", "plan_gemm"),
    ("fusec.scheduling.attention_plan", "plan_attention"),
    ("fusec.scheduling.window_group_plan", "plan_window"),
    ("fusec.scheduling.pointwise_group_plan", "plan_pointwise"),
    ("fusec.scheduling.pointwise_group_plan", "plan_layout"),
    ("fusec.scheduling.row_index", "collapse_index"),
    ("fusec.scheduling.concat_segments", "segmented_concat"),
)
RESOLVE = ("fusec.analysis.targets", "resolve_target")

AFTER_BOUND = 1
"""Runs of each planner per final group from `tile-and-promote` on."""
AFTER_EXCEPTIONS: dict[str, int] = {}
"""Planners that still run more than once per final group after
`tile-and-promote`, and the bound each meets."""
BEFORE_BOUND = 1
"""Runs per final group before `tile-and-promote`: fusion's legality and
`register-budget` ask a group's kind, schedule and register estimate while
merges are decided, each answer kept (`analysis/group_memo.py`) while the
group stays as it is, so a final group is planned once there too."""
RESOLVES_PER_COMPILE = 6
"""The compile job, fuse-attention (twice), form-fusion-groups,
register-budget and tile-and-promote each resolve `--target`."""

BEFORE, AFTER = "before tile-and-promote", "tile-and-promote and code generation"


@dataclass
class PlannerCounter:
    """Counts the outermost call of each planner per (phase, group)."""

    phase: str = BEFORE
    counts: Counter[tuple[str, str, int]] = field(default_factory=Counter[tuple[str, str, int]])
    resolves: Counter[str] = field(default_factory=Counter[str])
    origin: dict[int, GroupOp] = field(default_factory=dict[int, GroupOp])
    keep: list[GroupOp] = field(default_factory=list[GroupOp])  # copies alive: ids stay unique
    active: set[str] = field(default_factory=set[str])

    def group_of(self, args: tuple[Any, ...]) -> GroupOp | None:
        """The group a planner's arguments plan, traced back through copies."""
        for a in args:
            body = a if isinstance(a, GroupBody) else getattr(a, "body", None)
            group = a if isinstance(a, GroupOp) else body.group if isinstance(body, GroupBody) \
                else None
            while group is not None and id(group) in self.origin:
                group = self.origin[id(group)]
            if group is not None:
                return group
        return None

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if name in self.active:  # a planner's call of itself is one run
                return fn(*args, **kwargs)
            group = self.group_of(args)
            if group is not None:
                self.counts[(self.phase, name, id(group))] += 1
            self.active.add(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.active.discard(name)
        return counted

    def copied(self, copy: GroupOp, group: GroupOp) -> None:
        if copy is not group:
            self.origin[id(copy)] = group
            self.keep.append(copy)


def _rebind(monkeypatch: pytest.MonkeyPatch, fn: object, new: object) -> None:
    """Replace `fn` in every fusec module that holds it."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("fusec"):
            for key, value in list(vars(module).items()):
                if value is fn:
                    monkeypatch.setattr(module, key, new)


def _install(monkeypatch: pytest.MonkeyPatch, counter: PlannerCounter) -> None:
    for mod, attr in PLANNERS:
        fn = getattr(importlib.import_module(mod), attr)
        _rebind(monkeypatch, fn, counter.wrap(f"{mod.rsplit('.', 1)[1]}.{attr}", fn))
    for info in pkgutil.iter_modules(kinds.__path__):
        module = importlib.import_module(f"{kinds.__name__}.{info.name}")
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == module.__name__ \
                    and "choose" in value.__dict__:
                monkeypatch.setattr(value, "choose", counter.wrap(
                    f"kinds.{info.name}.choose", value.__dict__["choose"]))
    resolve = getattr(importlib.import_module(RESOLVE[0]), RESOLVE[1])

    def resolved(*args: Any, **kwargs: Any) -> Any:
        counter.resolves[counter.phase] += 1
        return resolve(*args, **kwargs)
    _rebind(monkeypatch, resolve, resolved)

    decompose = decompose_group.decomposed

    @contextmanager
    def decomposed(group: GroupOp) -> Iterator[GroupOp]:
        with decompose(group) as flat:
            counter.copied(flat, group)
            yield flat
    _rebind(monkeypatch, decompose, decomposed)
    collapse = layout_collapse.collapsed

    def collapsed(group: GroupOp) -> GroupOp:
        out = collapse(group)
        counter.copied(out, group)
        return out
    _rebind(monkeypatch, collapse, collapsed)

    import fusec.codegen.generate as generate

    generate_program = generate.generate_program

    def generated(*args: Any, **kwargs: Any) -> Any:
        counter.phase = AFTER
        return generate_program(*args, **kwargs)
    monkeypatch.setattr(generate, "generate_program", generated)


@dataclass
class _Phases(Instrumentation):
    counter: PlannerCounter = field(default_factory=PlannerCounter)

    def before(self, p: ModulePass, module: ModuleOp) -> None:
        if p.name == "tile-and-promote":
            self.counter.phase = AFTER
        super().before(p, module)


def planner_runs(monkeypatch: pytest.MonkeyPatch, text: str
                 ) -> tuple[PlannerCounter, dict[tuple[str, str], int], int]:
    """Compile `text`; the counter, the most runs of each (phase, planner) for
    one final group, and the number of final groups."""
    compile_model(text)  # every module the compile imports is imported before patching
    counter = PlannerCounter()
    with monkeypatch.context() as patch:
        _install(patch, counter)
        artifacts = compile_model(text, instrument=_Phases(counter=counter))
    finals = {id(op) for op in artifacts.module.walk() if isinstance(op, GroupOp)}
    most: dict[tuple[str, str], int] = {}
    for (phase, name, group), n in counter.counts.items():
        if group in finals:
            most[(phase, name)] = max(most.get((phase, name), 0), n)
    return counter, most, len(finals)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_planner_runs_once_per_group(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    counter, most, groups = planner_runs(monkeypatch, PROGRAMS[name])
    print(f"\n{name}: {groups} group(s); most runs of a planner for one group:")
    for (phase, planner), n in sorted(most.items()):
        print(f"  {phase:40} {planner:40} {n}")
    print(f"  resolve_target: {dict(counter.resolves)}")
    assert groups >= 1
    assert most, "no planner ran for a final group: the counters are not in place"
    after = {p: n for (phase, p), n in most.items() if phase == AFTER}
    assert all(n <= AFTER_EXCEPTIONS.get(p, AFTER_BOUND) for p, n in after.items()), after
    before = {p: n for (phase, p), n in most.items() if phase == BEFORE}
    assert all(n <= BEFORE_BOUND for n in before.values()), before
    assert sum(counter.resolves.values()) <= RESOLVES_PER_COMPILE
    assert counter.resolves[AFTER] <= 1  # tile-and-promote's own; code generation none


def test_counter_sees_a_rederivation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planner asked twice for a final group after `tile-and-promote` is
    counted twice: the bound above can fail."""
    import fusec.codegen.generate as generate
    from fusec.scheduling import reduction_plan

    real = generate.generate_program

    def twice(module: ModuleOp, *args: Any, **kwargs: Any) -> Any:
        for group in module.walk():
            if isinstance(group, GroupOp):
                with decompose_group.decomposed(group) as flat:
                    reduction_plan.analyze(GroupBody.of(flat))
                    reduction_plan.analyze(GroupBody.of(flat))
        return real(module, *args, **kwargs)
    monkeypatch.setattr(generate, "generate_program", twice)
    _, most, _ = planner_runs(monkeypatch, PROGRAMS["softmax"])
    assert most[(AFTER, "reduction_plan.analyze")] > AFTER_EXCEPTIONS.get(
        "reduction_plan.analyze", AFTER_BOUND)
