"""The seeds' fusion rules, each visible as a remark:

- arithmetic intensity under 2 FLOP/byte: fuse whenever legal (the gain
  estimate may not veto a memory-bound fusion, unless it recomputes work);
- over 10 FLOP/byte: fuse only when the cost model predicts a gain;
- a fusion that lowers register-limited occupancy by more than 20% is refused
  (`form-fusion-groups{max_occupancy_drop=...}`).
"""

from __future__ import annotations

import re

from test_fusion_legality import candidate_from_text
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.fusion_legality import (
    Candidate,
    gain_ok,
)
from fusec.analysis.remarks import collect_remarks
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp

# exp of 4M elements feeding a 4-row sum: one fused kernel has 4096 threads
# where the exp alone fills the GPU, so the roofline charges lost
# parallelism and dT < 0; at ~1.2 FLOP/byte the fusion is taken anyway.
FEW_LONG_ROWS = """
func.func @f(%x: tensor<4x1048576xf32>) -> tensor<4x1xf32> {
  %e = nn.exp %x : tensor<4x1048576xf32>
  %s = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<4x1048576xf32>) -> tensor<4x1xf32>
  func.return %s : tensor<4x1xf32>
}
"""

MATMUL_RELU = """
func.func @f(%x: tensor<1024x1024xf32>, %w: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %m = nn.matmul %x, %w : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %r = nn.relu %m : tensor<1024x1024xf32>
  func.return %r : tensor<1024x1024xf32>
}
"""


def siblings(n: int) -> str:
    """Two chains of `n` multiplies sharing `%x`, each with its own inputs:
    horizontal fusion would double the pointers one kernel keeps."""
    ys = ", ".join(f"%y{i}: tensor<4096xf32>, %z{i}: tensor<4096xf32>" for i in range(n))
    t = "(tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>"
    lines = [f"func.func @f(%x: tensor<4096xf32>, {ys}) -> (tensor<4096xf32>, tensor<4096xf32>) {{"]
    for side in ("y", "z"):
        prev = "%x"
        for i in range(n):
            lines.append(f"  %{side}m{i} = nn.mul {prev}, %{side}{i} : {t}")
            prev = f"%{side}m{i}"
    lines.append(f"  func.return %ym{n - 1}, %zm{n - 1} : tensor<4096xf32>, tensor<4096xf32>")
    return "\n".join([*lines, "}"])


def fuse(text: str, options: str = "") -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    spec = f"decompose,form-fusion-groups{{target=h200 {options}}}".replace("{target=h200 }",
                                                                          "{target=h200}")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return module


def group_count(module: ModuleOp) -> int:
    return sum(1 for op in module.walk() if isinstance(op, GroupOp))


def candidate(text: str, a: str, b: str, **options: object) -> Candidate:
    return candidate_from_text(text, a, b, **options)


def test_low_intensity_fuses_whenever_legal() -> None:
    # Demand a gain of 1 s, which no fusion here reaches: the memory-bound
    # fusion (~1.2 FLOP/byte) is still taken, and says why.
    verdict = gain_ok(candidate(FEW_LONG_ROWS, "e", "s", min_gain=1.0))
    assert verdict.ok and verdict.gain is not None
    assert re.search(r"dT = [\d.]+ us .*; arithmetic intensity 1.\d+ FLOP/byte < 2: fused "
                     r"whenever legal$", verdict.gain.summary()), verdict.gain.summary()
    module = fuse(FEW_LONG_ROWS)
    assert group_count(module) == 1
    assert any("fused nn.exp (%e) into group g0" in n for n in collect_remarks(module))


def test_low_intensity_threshold_is_an_option() -> None:
    verdict = gain_ok(candidate(FEW_LONG_ROWS, "e", "s", min_gain=1.0, low_intensity=0.0))
    assert not verdict.ok and verdict.reason.startswith("the cost model predicts no gain")


def test_high_intensity_fuses_only_with_a_predicted_gain() -> None:
    assert gain_ok(candidate(MATMUL_RELU, "m", "r")).ok  # the epilogue saves 8 MiB
    verdict = gain_ok(candidate(MATMUL_RELU, "m", "r", min_gain=1.0))  # ask for 1 s
    assert not verdict.ok
    assert re.match(r"arithmetic intensity \d+ FLOP/byte > 10 fuses only with a predicted "
                    r"gain, and the cost model predicts none: dT = ", verdict.reason)


def test_recomputation_is_not_waved_through_by_low_intensity() -> None:
    text = """
func.func @f(%x: tensor<65536x4096xf32>, %b: tensor<4096xf32>) -> tensor<65536x4096xf32> {
  %g = nn.gelu %b : tensor<4096xf32>
  %y = nn.add %x, %g : (tensor<65536x4096xf32>, tensor<4096xf32>) -> tensor<65536x4096xf32>
  func.return %y : tensor<65536x4096xf32>
}"""
    verdict = gain_ok(candidate(text, "g", "y"))
    assert not verdict.ok and verdict.reason.startswith("the cost model predicts no gain")


def test_occupancy_drop_within_the_register_budget_is_accepted() -> None:
    """The seeds' 20% occupancy rule applies only past the target's register
    budget: below it the SM keeps enough warps to hide memory latency, and a
    split costs more traffic than the lost occupancy (measured on the H200:
    bench/programs/wide_tanh.mlir as one kernel 0.38 ms, split 14.4 ms)."""
    module = fuse(siblings(11))
    notes = collect_remarks(module)
    assert group_count(module) == 1  # the siblings merged, though occupancy drops
    assert not any("lowers occupancy" in n for n in notes), notes


def test_occupancy_threshold_is_a_pass_option() -> None:
    module = fuse(siblings(11), "max_occupancy_drop=0.5")
    assert group_count(module) == 1
