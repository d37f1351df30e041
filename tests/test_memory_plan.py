"""The memory plan: buffers reused by liveness, never while a value is live."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusec.analysis.memory_plan import MemoryPlan, plan_memory, storage_classes
from fusec.analysis.program import ArgSpec, FunctionProgram, KernelLaunch, TensorSpec, View

F32 = TensorSpec((4, 8), "float32")


def launch(reads: list[str], writes: str) -> KernelLaunch:
    """A launch reading `reads` and writing `writes` (flat views)."""
    args = [ArgSpec(v, (32,), False) for v in reads] + [ArgSpec(writes, (32,), True)]
    return KernelLaunch("k", (1, 1, 1), (32, 1, 1), 0, args, ["nn.exp"], f"g_{writes}")


def program(
    steps: list[tuple[list[str], str]],
    inputs: tuple[str, ...] = ("x",),
    outputs: tuple[str, ...] = ("y",),
    views: list[View] | None = None,
    constants: tuple[str, ...] = (),
) -> FunctionProgram:
    """A function whose launches are `steps` (reads, written value)."""
    names = {*inputs, *outputs, *constants, *(w for _, w in steps)}
    names |= {v for reads, _ in steps for v in reads}
    names |= {v.value for v in views or []}
    return FunctionProgram(
        name="f", inputs=list(inputs), input_names=list(inputs), outputs=list(outputs),
        values=dict.fromkeys(sorted(names), F32),
        launches=[launch(r, w) for r, w in steps], views=views or [],
        constants={c: np.zeros((4, 8), np.float32) for c in constants},
    )


def assert_safe(fp: FunctionProgram, plan: MemoryPlan) -> None:
    """Values sharing a buffer have disjoint live ranges (one dies in a launch
    strictly before the other's first), each fits its buffer, and no launch
    gets one buffer twice."""
    by_buffer: dict[int, list[str]] = {}
    for value, buf in plan.assignment.items():
        by_buffer.setdefault(buf, []).append(value)
        assert plan.buffers[buf] >= fp.values[value].nbytes
    for values in by_buffer.values():
        spans = sorted(plan.live[v] for v in values)
        for (_, last), (first, _) in itertools.pairwise(spans):
            assert last < first, f"{values} overlap: {spans}"
    for lau in fp.launches:
        bufs = [plan.assignment[a.value] for a in lau.args if a.value in plan.assignment]
        assert len(bufs) == len(set(bufs)), f"launch {lau.group} aliases a buffer"


def test_chain_uses_two_buffers() -> None:
    steps = [(["x"], "t0")] + [([f"t{i}"], f"t{i + 1}") for i in range(9)] + [(["t9"], "y")]
    fp = program(steps)
    plan = plan_memory(fp)
    assert len(plan.buffers) == 2
    assert plan.assignment["t0"] == plan.assignment["t2"] != plan.assignment["t1"]
    assert_safe(fp, plan)


def test_value_read_late_keeps_its_buffer() -> None:
    # t0 is read again by the last launch: nothing in between may take its buffer.
    fp = program([(["x"], "t0"), (["t0"], "t1"), (["t1"], "t2"), (["t2"], "t3"),
                  (["t3", "t0"], "y")])
    plan = plan_memory(fp)
    others = {plan.assignment[v] for v in ("t1", "t2", "t3")}
    assert plan.assignment["t0"] not in others
    assert plan.live["t0"] == (0, 4)
    assert_safe(fp, plan)


def test_a_kernel_never_reads_and_writes_one_buffer() -> None:
    # t0 dies in launch 1, which also writes t1: t1 must not take t0's buffer.
    fp = program([(["x"], "t0"), (["t0"], "t1"), (["t1"], "y")])
    plan = plan_memory(fp)
    assert plan.assignment["t0"] != plan.assignment["t1"]
    assert_safe(fp, plan)


def test_inputs_outputs_constants_are_never_pooled() -> None:
    fp = program([(["x", "c"], "t0"), (["t0"], "y"), (["y"], "t1"), (["t1"], "z")],
                 outputs=("y", "z"), constants=("c",))
    plan = plan_memory(fp)
    assert set(plan.assignment) == {"t0", "t1"}
    assert storage_classes(fp) == {"x": "input", "c": "constant", "y": "output",
                                   "z": "output", "t0": "buffer", "t1": "buffer"}


def test_a_view_extends_the_life_of_its_source() -> None:
    # r is a reshape of t0, read by the last launch: t0's buffer stays reserved.
    fp = program([(["x"], "t0"), (["t0"], "t1"), (["t1"], "t2"), (["t2", "r"], "y")],
                 views=[View("r", "t0")])
    plan = plan_memory(fp)
    assert "r" not in plan.assignment
    assert plan.live["t0"] == (0, 3)
    assert_safe(fp, plan)


def test_a_returned_view_makes_its_source_an_output() -> None:
    fp = program([(["x"], "t0"), (["t0"], "t1")], outputs=("r",), views=[View("r", "t1")])
    assert storage_classes(fp)["t1"] == "output"
    assert "t1" not in plan_memory(fp).assignment


def test_plan_round_trips_through_json() -> None:
    fp = program([(["x"], "t0"), (["t0"], "t1"), (["t1"], "y")])
    plan = plan_memory(fp)
    assert MemoryPlan.from_json(plan.to_json()) == plan


@st.composite
def random_programs(draw: st.DrawFn) -> FunctionProgram:
    """Random DAGs: each launch reads 1-3 earlier values and writes a new one."""
    n = draw(st.integers(2, 14))
    steps: list[tuple[list[str], str]] = []
    available = ["x"]
    for i in range(n):
        reads = draw(st.lists(st.sampled_from(available), min_size=1, max_size=3, unique=True))
        steps.append((reads, f"t{i}"))
        available.append(f"t{i}")
    outputs = tuple(draw(st.lists(st.sampled_from(available[1:]), min_size=1, max_size=2,
                                  unique=True)))
    return program(steps, outputs=outputs)


@settings(max_examples=150, deadline=None)
@given(random_programs())
def test_random_programs_are_planned_safely(fp: FunctionProgram) -> None:
    assert_safe(fp, plan_memory(fp))
