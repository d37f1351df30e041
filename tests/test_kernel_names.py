"""Kernel names in kernels.py: one per kernel, however long the function's
name (issue 10 item 1: two kernels of a long-named function once shared a
name, the later definition replaced the earlier, and results were wrong)."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.codegen.generate import check_unique_names, top_level_names
from fusec.codegen.kernel_source import PARTIALS_SUFFIX, KernelSource, NameTable
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program

LONG = "a_function_whose_name_is_well_past_forty_characters_long"

# Two matmuls, a reduction, a conv + pool, a lone conv and pointwise ops: each
# emitter kind names at least one kernel of @LONG.
PROGRAM = f"""
func.func @{LONG}(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4x8xf32>,
                  %x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>)
    -> (tensor<4x8xf32>, tensor<4xf32>, tensor<1x3x2x2xf32>, tensor<1x3x4x4xf32>) {{
  %m = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %m2 = nn.matmul %m, %c : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = nn.exp %c : tensor<4x8xf32>
  %r = nn.reduce_sum %e {{axes = [1]}} : (tensor<4x8xf32>) -> tensor<4xf32>
  %y = nn.conv2d %x, %w : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  %p = nn.max_pool2d %y {{kernel = [2, 2], strides = [2, 2]}}
      : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32>
  %t = nn.tanh %x : tensor<1x2x6x6xf32>
  %y2 = nn.conv2d %t, %w : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  func.return %m2, %r, %p, %y2 : tensor<4x8xf32>, tensor<4xf32>, tensor<1x3x2x2xf32>,
      tensor<1x3x4x4xf32>
}}
"""


@pytest.mark.parametrize("fusion", [True, False])
def test_long_function_name_kernels_are_distinct_and_correct(fusion: bool) -> None:
    program = compile_model(PROGRAM, fusion=fusion).program
    launches = program.functions[LONG].launches
    names = [launch.kernel for launch in launches]
    assert len(names) >= 5, program.kernels_source
    assert len(set(names)) == len(names), names
    defined = [n for n in top_level_names(program.kernels_source) if n in names]
    assert sorted(defined) == sorted(names), program.kernels_source
    reference = parse_module(make_context(), PROGRAM, "test.mlir")
    inputs = random_inputs(find_function(reference, LONG), 3)
    expected = run_module(reference, inputs, LONG)
    got = run_program(program, LONG, inputs, device="sim")
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=program.kernels_source)


def _kernel(name: str, body_name: str | None = None) -> KernelSource:
    text = f"@cuda.jit\ndef {body_name or name}(out0):\n    out0[0] = 1\n"
    return KernelSource(name, text, (1, 1, 1), (1, 1, 1), [])


def test_a_name_bound_twice_is_an_internal_error() -> None:
    with pytest.raises(RuntimeError, match="'k' twice"):
        check_unique_names([_kernel("k"), _kernel("k")])
    with pytest.raises(RuntimeError, match="'cuda' twice"):
        check_unique_names([_kernel("cuda")])
    with pytest.raises(RuntimeError, match="does not define"):
        check_unique_names([_kernel("k", "k2")])
    check_unique_names([_kernel("k"), _kernel("k_2")])


def test_names_bound_inside_a_prelude_helper_are_not_top_level() -> None:
    """A prelude helper defined under `if`/`else` binds its own name, not its
    locals: the quad store's loop variable `k` once reserved the name `k`
    for every kernel."""
    text = "if x:\n    def f(a):\n        for k in range(4):\n            a += k\n"
    text += "else:\n    g = 1\nfor i in range(2):\n    h = i\n"
    assert top_level_names(text) == ["f", "g", "i", "h"]


def test_a_kernel_name_keeps_its_partials_name_free() -> None:
    """A split reduction's first kernel is `<name>_partials`: a name that a
    sanitized, cut model name made earlier must not be taken twice (the
    suffix was once assumed to end no other name)."""
    names = NameTable()
    earlier = names.fresh("f_g1_sum_partials" + "_" * 30 + "_exp")  # cut at 40 characters
    assert earlier == "f_g1_sum_partials"
    name = names.fresh("f_g1_sum", derived=(PARTIALS_SUFFIX,))
    assert name == "f_g1_sum_2" and name + PARTIALS_SUFFIX in names.used
    # Neither name, nor its partials kernel, is handed out again.
    assert names.fresh("f_g1_sum_2_partials") == "f_g1_sum_2_partials_2"
    assert names.fresh("f_g1_sum_2") == "f_g1_sum_2_2"


def test_kernels_with_one_body_are_checked_under_their_own_names() -> None:
    """Kernels that differ only in their names and comments are parsed once
    (repeated layers): each still binds its own name, and a helper two of
    them bind is still a clash."""
    def kernel(name: str, helper: str = "") -> KernelSource:
        text = f"# group {name}\n@cuda.jit\ndef {name}(in0, out0):\n    out0[0] = in0[0]\n"
        return KernelSource(name, f"{helper}{text}", (1, 1, 1), (1, 1, 1), [])

    check_unique_names([kernel(f"layer{i}_add") for i in range(6)])
    with pytest.raises(RuntimeError, match="'shared_helper' twice"):
        check_unique_names([kernel("a", "def shared_helper():\n    pass\n"),
                            kernel("b", "def shared_helper():\n    pass\n")])
    with pytest.raises(RuntimeError, match="'b' twice"):
        check_unique_names([kernel("a", "b = 1\n"), kernel("b")])
