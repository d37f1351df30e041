"""Dead ops and repeated work before fusion: the default pipeline runs xDSL's
`cse` and `dce` ahead of form-fusion-groups, so an unused op gets no kernel, an
op written twice is computed once, and a dead reader no longer costs its
producer a second output. Kernel counts and numbers (simulator vs the NumPy
reference, fresh random inputs) for each; the IR shapes are in
tests/filecheck/passes/cleanup_before_fusion.mlir."""

from __future__ import annotations

import numpy as np

from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import run_module
from fusec.runtime.executor import run_program

T = "tensor<4x8xf32>"
BIN = f"({T}, {T}) -> {T}"

UNUSED_TANH = f"""\
func.func @f(%x: {T}) -> {T} {{
  %dead = nn.tanh %x : {T}
  %e = nn.exp %x : {T}
  func.return %e : {T}
}}
"""

TWICE = f"""\
func.func @f(%x: {T}) -> {T} {{
  %a = nn.exp %x : {T}
  %b = nn.exp %x : {T}
  %s = nn.add %a, %b : {BIN}
  func.return %s : {T}
}}
"""

DEAD_BRANCH = f"""\
func.func @f(%x: {T}) -> {T} {{
  %a = nn.exp %x : {T}
  %t = nn.tanh %a : {T}
  %u = nn.mul %t, %a : {BIN}
  %n = nn.neg %a : {T}
  func.return %n : {T}
}}
"""


def check(text: str, launches: int, ops: list[str]) -> None:
    """Compile `text`; assert the launch count and the ops the kernels run,
    and compare the simulator's outputs with the reference."""
    art = compile_model(text)
    fp = art.program.functions["f"]
    assert len(fp.launches) == launches, [launch.ops for launch in fp.launches]
    assert sorted(op for launch in fp.launches for op in launch.ops) == sorted(ops)
    rng = np.random.default_rng()
    module = parse_module(make_context(), text, "t.mlir")
    inputs = [rng.standard_normal(fp.values[v].shape).astype(np.float32) + 0.5
              for v in fp.inputs]
    want = run_module(module, inputs)
    got = run_program(art.program, "f", inputs, memory=art.memory["f"])
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_unused_op_gets_no_kernel() -> None:
    check(UNUSED_TANH, 1, ["nn.exp"])


def test_the_same_pure_op_twice_is_computed_once() -> None:
    check(TWICE, 1, ["nn.exp", "nn.add"])


def test_dead_branch_does_not_stop_fusion() -> None:
    check(DEAD_BRANCH, 1, ["nn.exp", "nn.neg"])
