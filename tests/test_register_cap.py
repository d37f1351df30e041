"""`--max-registers N`: every kernel declared with numba's `max_registers=N`
(the cap reaches the JIT, the kept-cubin and `--ptx-info` paths), groups
decided by ptxas's count under the cap, and a split only when the capped
kernel's spills cost more than the split."""

from __future__ import annotations

import math
import os
import shutil
import stat
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.remarks import RemarkCollector, collect_remarks
from fusec.analysis.targets import get_target
from fusec.codegen import build_pool, kernel_probe
from fusec.codegen.generate import generate_program
from fusec.codegen.kernel_probe import KernelCount, KernelProbe
from fusec.codegen.ptx import compile_program_ptx, program_signatures
from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.passes.register_budget import _Budgeter  # pyright: ignore[reportPrivateUsage]

ROOT = Path(__file__).resolve().parent.parent
WIDE_TANH = ROOT / "bench" / "programs" / "wide_tanh.mlir"
PTXAS = shutil.which("ptxas")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas is not installed (CUDA toolkit)")

SMALL = """func.func @f(%a: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %m = nn.mul %a, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %t = nn.tanh %m : tensor<4096xf32>
  %s = nn.add %t, %a : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  func.return %s : tensor<4096xf32>
}"""


@pytest.fixture
def fresh_builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No kernel built before, in this process or the kernel cache."""
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    build_pool.forget_builds()


def grouped(text: str, budget: str = "") -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    spec = "decompose,form-fusion-groups{target=h200},group-each-op" + budget
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return module


def only_group(module: ModuleOp) -> GroupOp:
    (group,) = [op for op in module.walk() if isinstance(op, GroupOp)]
    return group


def ptx_or_skip(program):  # type: ignore[no-untyped-def]
    try:
        return compile_program_ptx(program)
    except FusecError as err:  # no libNVVM / NVRTC: nothing to count with
        pytest.skip(f"numba cannot compile PTX here: {err}")


def test_every_kernel_is_declared_with_the_cap() -> None:
    module = grouped(SMALL, ",register-budget{max_registers=48 ptxas=false}")
    source = generate_program(module).kernels_source
    assert source.count("cuda.jit(max_registers=48)") == 1
    plain = generate_program(grouped(SMALL, ",register-budget{ptxas=false}")).kernels_source
    assert "max_registers" not in plain  # and so the kernel cache keys differ


@needs_ptxas
@pytest.mark.slow
def test_max_registers_32_leaves_no_kernel_over_32_by_ptxas() -> None:
    art = compile_model(WIDE_TANH, target="h200", schedule=ScheduleOptions(max_registers=32))
    info = ptx_or_skip(art.program)
    assert info
    over = {k: e["registers"] for k, e in info.items() if int(e["registers"]) > 32}
    assert not over, over
    notes = collect_remarks(art.module)
    assert any("ptxas counted" in n for n in notes), notes
    # each group over the cap says whether it was kept capped or split, and why
    assert any(n.startswith("remark: kept group") or "would spill" in n for n in notes), notes


@needs_ptxas
def test_probe_counts_each_kernel_once(fresh_builds: None) -> None:
    group = only_group(grouped(SMALL))
    probe = KernelProbe()
    h200 = get_target("h200")
    first = probe.count(group, h200)
    if first is None:
        pytest.skip(f"no register count here: {probe.note}")
    again = probe.count(group.clone(), h200)
    assert again == first and probe.compiled == 1 and probe.cached == 1
    assert 0 < first.registers <= 64 and first.spill_bytes == 0
    assert first.threads == 1024  # 4096 elements, 4 per thread
    capped = probe.count(group, h200, cap=24)  # another key (24: sm_90's lowest cap)
    assert capped is not None and capped.registers <= 24 and probe.compiled == 2


def test_without_ptxas_the_estimate_decides_with_a_note(monkeypatch) -> None:
    monkeypatch.setattr(kernel_probe.shutil, "which", lambda _name: None)
    module = grouped(SMALL, ",register-budget{max_registers=24}")
    notes = collect_remarks(module)
    assert "note: register counts are estimates: ptxas is not installed" in notes, notes
    # the estimate (25; ptxas counts 30) over the cap decides alone: split, as without a probe
    assert len([op for op in module.walk() if isinstance(op, GroupOp)]) > 1


class FakeProbe(KernelProbe):
    """Hands out a fixed count (the decision logic, without compiling)."""

    def __init__(self, spill_bytes: int) -> None:
        super().__init__()
        self.spill = spill_bytes

    def count(self, group: GroupOp, target, cap: int = 0) -> KernelCount:  # type: ignore[no-untyped-def]
        return KernelCount(cap, self.spill, 1 << 20)


@pytest.mark.parametrize(("spill", "kept"), [(8, True), (4096, False)])
def test_split_only_when_the_spills_cost_more(spill: int, kept: bool) -> None:
    """A few spilled bytes per thread cost less than writing and re-reading
    a 4 MiB intermediate; kilobytes per thread cost more."""
    module = grouped(SMALL.replace("4096", str(1 << 20)))
    group = only_group(module)
    remarks = RemarkCollector()
    _Budgeter(16, remarks, get_target("h200"), 16, FakeProbe(spill)).fit(group)
    groups = [op for op in module.walk() if isinstance(op, GroupOp)]
    text = [str(r) for r in remarks.remarks]
    if kept:
        assert len(groups) == 1 and group.attributes["max_registers"]
        assert any(t.startswith(f"remark: kept group g0 capped at 16 registers with {spill} "
                                "bytes of spill") and "cheaper than a split" in t
                   for t in text), text
    else:
        assert len(groups) > 1
        assert any(f"would spill {spill} bytes per thread" in t and "more than a split" in t
                   for t in text), text
        assert any(t.startswith("remark: split group g0") for t in text), text


@needs_ptxas
@pytest.mark.slow
def test_kept_cubins_are_assembled_under_the_cap(tmp_path: Path, monkeypatch,
                                                 fresh_builds: None) -> None:
    """The runtime's parallel compile reads the cap from the kernel's
    declaration and hands it to ptxas (a wrapper logs its arguments)."""
    from fusec.runtime.kernel_build import compile_parallel

    assert PTXAS is not None
    log = tmp_path / "args.txt"
    wrapper = tmp_path / "bin" / "ptxas"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {PTXAS} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    program = generate_program(grouped(SMALL, ",register-budget{max_registers=48 ptxas=false}"))
    try:
        code = compile_parallel(program.kernels_source, program_signatures(program),
                                (9, 0)).code
    except FusecError as err:
        pytest.skip(f"numba cannot compile PTX here: {err}")
    assert all(c.cubin for c in code.values())
    assert "-maxrregcount=48" in log.read_text()


def test_the_probe_stops_at_its_time_budget(fresh_builds: None) -> None:
    """Past its seconds, the probe builds nothing more and says why: a
    compile never waits minutes on ptxas (the estimate decides instead)."""
    builds: list[str] = []
    forget = build_pool.add_listener(lambda event, key, label: builds.append(event))
    try:
        probe = KernelProbe(budget_s=1e-9)
        probe.seconds = 1.0  # the budget is spent
        assert probe.count(only_group(grouped(SMALL)), get_target("h200")) is None
        assert "s for ptxas is spent" in probe.note and probe.compiled == 0
        probe = KernelProbe(budget_s=0.0)
        assert probe.count(only_group(grouped(SMALL)), get_target("h200")) is None
        assert "ptxas_wait=0" in probe.note and probe.compiled == 0
    finally:
        forget()
    assert builds == []  # and no build was started for a count nobody waits for


def test_without_time_for_ptxas_kernels_built_before_are_counted(fresh_builds: None) -> None:
    """`ptxas_wait=0` (a compile that builds no kernels: `fusec MODEL -o
    OUT`) counts a kernel the kernel cache has, and builds none."""
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not installed")
    group, target = only_group(grouped(SMALL)), get_target("h200")
    first = KernelProbe(budget_s=math.inf).count(group, target)  # built, kept in the cache
    if first is None:
        pytest.skip("numba cannot compile PTX here")
    build_pool.forget_builds()  # a new process: only the cache knows it
    builds: list[str] = []
    forget = build_pool.add_listener(lambda event, key, label: builds.append(event))
    try:
        probe = KernelProbe(budget_s=0.0)
        assert probe.count(group, target) == first
    finally:
        forget()
    assert builds == ["cached"] and probe.cached == 1 and probe.compiled == 0


def test_a_cap_is_counted_past_the_time_budget(fresh_builds: None) -> None:
    """Under `--max-registers` every kernel is counted, budget or not: a cap
    decided by estimates let a max-pool kernel spill 24 bytes at 48
    registers without a remark (MobileNet, once the budget was spent)."""
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not installed")
    probe = KernelProbe(budget_s=0.0)
    count = probe.count(only_group(grouped(SMALL)), get_target("h200"), cap=48)
    if count is None and probe.unavailable:
        pytest.skip(f"no PTX here: {probe.note}")
    assert count is not None and 0 < count.registers <= 48 and probe.compiled == 1


@pytest.mark.parametrize(("flags", "wait"), [
    ([], 0.0),  # OUT's kernels are built where it runs: no build for a count alone
    (["--save-kernels"], None), (["--ptx-info"], None), (["--autotune"], None),
])
def test_the_command_line_waits_for_builds_only_where_it_builds(flags: list[str],
                                                                wait: float | None) -> None:
    from fusec.compiler.cli import build_parser
    from fusec.compiler.cli_flags import pipeline_options
    from fusec.compiler.compile_pipeline import default_pipeline

    args = build_parser().parse_args(["m.mlir", "-o", "out", *flags])
    options = pipeline_options(args)
    assert options.schedule.ptxas_wait == wait
    spec = default_pipeline(make_registry([]), options)
    assert ("ptxas-wait=0.0" in spec) == (wait == 0.0)


def test_an_attention_group_is_not_counted() -> None:
    """`fuse-attention` sized the tile for the budget and register-budget
    keeps it whatever ptxas says: a count (the slowest kernel to build)
    would change only a remark."""
    from test_gqa import gqa_text

    ctx = make_context()
    module = parse_module(ctx, gqa_text(2, 2, 2, 64, 64, "f16"), "test.mlir")
    spec = "decompose,unmerge-broadcasts,fuse-attention{target=h200 engine=mma}," \
        "form-fusion-groups{target=h200},group-each-op"
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    (group,) = [op for op in module.walk() if isinstance(op, GroupOp)]
    budgeter = _Budgeter(128, RemarkCollector(), get_target("h200"), probe=KernelProbe())
    assert not budgeter.would_measure(group)
    assert _Budgeter(128, RemarkCollector(), get_target("h200"), cap=96,
                     probe=KernelProbe()).would_measure(group)  # a cap is a promise
