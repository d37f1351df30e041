"""A broadcast feeding a reduction group (issue 10 item 4): outputs whose
value is one number per row but whose shape spans the reduced axes (softmax
of a row broadcast from one number, the broadcast itself yielded) are
written element by element, fused into one kernel and unfused, in every row
schedule; checked in the simulator against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import check_program, tensor


def _check(text: str, fusion: bool, launches: int | None = None) -> None:
    program = compile_model(text, fusion=fusion).program
    if launches is not None:
        assert len(program.functions["f"].launches) == launches, program.kernels_source
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), 5)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=program.kernels_source)


def _softmax(src: tuple[int, ...], op: str, axis: int) -> str:
    x = tensor((4, 8))
    return f"""
func.func @f(%a: {tensor(src)}) -> {x} {{
  %b = nn.broadcast_to %a : ({tensor(src)}) -> {x}
  %s = nn.{op} %b {{axis = {axis}}} : {x}
  func.return %s : {x}
}}"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("src", [(4, 1), (1, 1), ()])
def test_softmax_of_a_broadcast(src: tuple[int, ...], op: str, fusion: bool) -> None:
    _check(_softmax(src, op, -1), fusion, 1 if fusion else None)


@pytest.mark.parametrize(
    ("src", "x", "axes"),
    [
        ((1, 8), (4, 8), [0]),  # column schedule
        ((2, 1, 5), (2, 3, 5), [1]),  # a middle axis
        ((3, 1), (2, 3, 4), [0, 2]),  # two axes, one of them leading
    ],
)
def test_non_trailing_axes_as_one_kernel(src: tuple[int, ...], x: tuple[int, ...],
                                         axes: list[int]) -> None:
    # The fusion pass keeps non-trailing reductions apart, so the group is
    # written by hand: the emitter must still handle it.
    kept = tensor(tuple(1 if d in axes else n for d, n in enumerate(x)))
    text = f"""
func.func @f(%a: {tensor(src)}) -> ({tensor(x)}, {tensor(x)}) {{
  %y, %z = fusion.group (%a) {{name = "g0", kind = "reduction"}}
      : ({tensor(src)}) -> ({tensor(x)}, {tensor(x)}) {{
  ^bb0(%p: {tensor(src)}):
    %b = nn.broadcast_to %p : ({tensor(src)}) -> {tensor(x)}
    %m = nn.reduce_max %b {{axes = {axes}, keepdims = true}} : ({tensor(x)}) -> {kept}
    %d = nn.sub %b, %m : ({tensor(x)}, {kept}) -> {tensor(x)}
    %e = nn.exp %d : {tensor(x)}
    %s = nn.reduce_sum %e {{axes = {axes}, keepdims = true}} : ({tensor(x)}) -> {kept}
    %r = nn.div %e, %s : ({tensor(x)}, {kept}) -> {tensor(x)}
    fusion.yield %r, %b : {tensor(x)}, {tensor(x)}
  }}
  func.return %y, %z : {tensor(x)}, {tensor(x)}
}}"""
    check_program(text, launches=1)


def _yielded_broadcast(src: tuple[int, ...], axes: list[int]) -> str:
    """%b = broadcast(%a) yielded beside a reduction of it, and both used."""
    x = tensor((2, 3, 4))
    kept = tensor(tuple(1 if d in axes else n for d, n in enumerate((2, 3, 4))))
    return f"""
func.func @f(%a: {tensor(src)}, %c: {x}) -> ({x}, {x}) {{
  %b = nn.broadcast_to %a : ({tensor(src)}) -> {x}
  %s = nn.reduce_sum %b {{axes = {axes}, keepdims = true}} : ({x}) -> {kept}
  %m = nn.mul %b, %c : ({x}, {x}) -> {x}
  %y = nn.add %m, %s : ({x}, {kept}) -> {x}
  func.return %y, %b : {x}, {x}
}}"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize(
    ("src", "axes"),
    [((3, 1), [2]), ((1, 3, 1), [2]), ((2, 1, 4), [1]), ((4,), [0, 1]), ((1, 3, 1), [0, 2])],
)
def test_broadcast_yielded_beside_its_reduction(src: tuple[int, ...], axes: list[int],
                                                fusion: bool) -> None:
    _check(_yielded_broadcast(src, axes), fusion)


@pytest.mark.parametrize(
    "options",
    [ReductionOptions(registers=False), ReductionOptions(fill_threads=4096, min_split_elems=4)],
)
def test_streamed_and_split_schedules(options: ReductionOptions,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", options)
    _check(_softmax((4, 1), "softmax", -1), True, 1)
    _check(_yielded_broadcast((3, 1), [2]), True)
