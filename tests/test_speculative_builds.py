"""Kernel builds started before the compile ends (`KernelProbe.speculate`,
called by `register-budget`): in a process that builds kernels anyway (its
workers run), every group's kernel is asked for as its schedule stands,
declared as the program will declare it, so that the runtime's build of
each is already running; counted through the build calls, never by time."""

from __future__ import annotations

import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from fusec.analysis.targets import get_target
from fusec.codegen import kernel_probe
from fusec.codegen.build_pool import Built
from fusec.codegen.kernel_cache import KernelCode, kernel_key
from fusec.codegen.kernel_unit import units_of_source
from fusec.codegen.ptx import program_signatures
from fusec.compiler.compile import compile_model
from fusec.compiler.compile_pipeline import ScheduleOptions
from fusec.dialects.fusion import GroupOp
from fusec.passes import register_budget

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Build requests (key, kernel) recorded and answered at once, as if
    workers ran and ptxas counted 32 registers."""
    seen: list[tuple[str, str]] = []

    def build(unit: Any, signature: Any, cc: Any, label: str = "", store: Any = True
              ) -> Future[Built]:
        seen.append((kernel_key(unit, signature, cc), label))
        done: Future[Built] = Future()
        done.set_result(Built(KernelCode("", None, 32, 0), False))
        return done

    monkeypatch.setattr(kernel_probe, "kernel_code", build)
    monkeypatch.setattr(kernel_probe, "workers_running", lambda: True)
    monkeypatch.setattr(kernel_probe, "simulating", lambda: False)
    monkeypatch.setattr(register_budget, "workers_running", lambda: True)
    monkeypatch.setattr(kernel_probe.shutil, "which", lambda name: f"/bin/{name}")
    return seen


@pytest.mark.parametrize("example", ["gpt2_block.mlir", "add_layernorm_gelu.mlir",
                                     "inverted_residual.mlir"])
def test_every_kernel_of_the_program_was_asked_for_before_the_compile_ended(
        asked: list[tuple[str, str]], example: str) -> None:
    program = compile_model((EXAMPLES / example).read_text(), target="h100").program
    signatures = program_signatures(program)
    units = units_of_source(program.kernels_source, signatures)
    final = {kernel_key(units[n], signatures[n], (9, 0)) for n in signatures}
    assert final and final <= {key for key, _ in asked}


@pytest.mark.parametrize(("switch", "value"), [("workers_running", False),
                                               ("simulating", True)])
def test_nothing_is_guessed_without_workers_or_in_the_simulator(
        asked: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, switch: str,
        value: bool) -> None:
    module = compile_model((EXAMPLES / "softmax.mlir").read_text(), target="h100").module
    groups = [op for op in module.walk() if isinstance(op, GroupOp)]
    monkeypatch.setattr(kernel_probe, switch, lambda: value)
    asked.clear()
    assert kernel_probe.KernelProbe().speculate(groups, get_target("h100")) == 0
    assert asked == []


def test_a_compile_that_started_the_workers_itself_guesses_nothing(
        asked: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """`fusec MODEL -o OUT` starts workers only for its counts: the other
    kernels are not built (they would take the cores from the compile)."""
    monkeypatch.setattr(register_budget, "workers_running", lambda: False)
    program = compile_model((EXAMPLES / "gpt2_block.mlir").read_text(), target="h100").program
    counted = {key for key, _ in asked}
    signatures = program_signatures(program)
    units = units_of_source(program.kernels_source, signatures)
    final = {kernel_key(units[n], signatures[n], (9, 0)) for n in signatures}
    assert not final <= counted


def test_a_group_whose_kernel_cannot_be_guessed_is_skipped(
        asked: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    module = compile_model((EXAMPLES / "add_layernorm_gelu.mlir").read_text(),
                           target="h100", fusion=False).module
    groups = [op for op in module.walk() if isinstance(op, GroupOp)]
    assert len(groups) >= 2
    real = kernel_probe._generate

    def generate(group: GroupOp, target: Any) -> Any:
        if group is groups[0]:
            raise NotImplementedError("no kernel for this one")
        return real(group, target)

    monkeypatch.setattr(kernel_probe, "_generate", generate)
    # the compile asked for these groups already: as if it had not
    monkeypatch.setattr(kernel_probe, "_SPECULATED", weakref.WeakSet())
    asked.clear()
    count = kernel_probe.KernelProbe().speculate(groups, get_target("h100"))
    assert 1 <= count == len({key for key, _ in asked})


def test_gemms_a_library_will_compute_are_neither_counted_nor_built(
        asked: list[tuple[str, str]]) -> None:
    """A matmul `tile-and-promote` gives to cuBLAS has no kernel: register-
    budget neither counts nor builds its fused GEMM ahead (GPT-2's cold
    first call waited 2 s for two such counts)."""
    source = (EXAMPLES / "gpt2_block.mlir").read_text()

    def compiled(gemm: str) -> tuple[set[str], set[str]]:
        """(the kernels asked for, the kernels the program launches)"""
        asked.clear()
        program = compile_model(source, target="h100",
                                schedule=ScheduleOptions(gemm=gemm)).program
        return {label for _, label in asked}, set(program_signatures(program))

    library_asked, library_kernels = compiled("library")
    fused_asked, _ = compiled("fused")
    assert fused_asked - library_kernels, "the fused GEMMs are asked: the check can fail"
    assert library_asked <= library_kernels


class _TimesConvolutions:
    """The timed library calls of a compile on its GPU: convolutions only."""

    def __init__(self, families: tuple[str, ...]) -> None:
        self.families = families

    def choose(self, point: Any) -> tuple[bool, str]:
        return point.model_library, ""

    def overrules(self, family: str) -> bool:
        return family in self.families


@pytest.mark.parametrize(("families", "planned"), [(("conv",), True),
                                                   (("conv", "gemm", "attention"), False)])
def test_gemms_stay_planned_where_only_convolutions_are_timed(
        asked: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch,
        families: tuple[str, ...], planned: bool) -> None:
    """A compile on its GPU times cuDNN's convolution calls and leaves GEMMs
    to the model: its GEMMs for cuBLAS are still not built ahead (they all
    were once any timing was on: a cold GPT-2 first call built 11 kernels
    for the 7 it ran). Under a tuner that may overrule GEMM choices (the
    autotuner) they are."""
    from fusec.compiler import library_clock

    monkeypatch.setattr(library_clock, "measured_library_calls",
                        lambda *a, **k: _TimesConvolutions(families))
    source = (EXAMPLES / "gpt2_block.mlir").read_text()
    program = compile_model(source, target="h100",
                            schedule=ScheduleOptions(gemm="library")).program
    extra = {label for _, label in asked} - set(program_signatures(program))
    assert (not extra) == planned


def test_attention_kernels_are_asked_for_before_grouping(
        asked: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """No later pass changes an attention group, and its kernel is the
    longest build: fuse-attention asks for it at once, before
    form-fusion-groups has run."""
    from fusec.passes import form_fusion_groups

    before: set[str] = set()
    grouping = form_fusion_groups.FormFusionGroupsPass.apply

    def apply(self: Any, ctx: Any, op: Any) -> None:
        before.update(key for key, _ in asked)
        grouping(self, ctx, op)

    monkeypatch.setattr(form_fusion_groups.FormFusionGroupsPass, "apply", apply)
    program = compile_model((EXAMPLES / "gpt2_block.mlir").read_text(), target="h100").program
    signatures = program_signatures(program)
    units = units_of_source(program.kernels_source, signatures)
    attention = [n for n in signatures if "attn" in n]
    assert attention
    assert {kernel_key(units[n], signatures[n], (9, 0)) for n in attention} <= before


def test_an_attention_kernel_asked_for_by_fuse_attention_is_not_generated_again(
        asked: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """register-budget's guesses skip the groups fuse-attention asked for
    (generating GPT-2's attention kernel takes 80 ms a layer)."""
    generated: list[str] = []
    generate = kernel_probe._generate  # pyright: ignore[reportPrivateUsage]

    def spy(group: GroupOp, target: Any) -> Any:
        generated.append(str(getattr(group.attributes.get("kind"), "data", "")))
        return generate(group, target)

    monkeypatch.setattr(kernel_probe, "_generate", spy)
    module = compile_model((EXAMPLES / "gpt2_block.mlir").read_text(), target="h100").module
    groups = [g for g in module.walk() if isinstance(g, GroupOp)]
    attention = sum(getattr(g.attributes.get("kind"), "data", "") == "attention" for g in groups)
    assert attention and generated.count("attention") == attention
