"""The fused compile never rejects a program the unfused compile accepts.

Fusion legality asks the writers' own rules (`analysis/in_place_reads.py`)
before it merges groups and before a group recomputes a value another group
writes, and `form-fusion-groups` splits a group the writers would still
refuse. Each program below compiled with `--no-fusion` but was refused with
fusion on: a recomputed value read through a gather or a transpose, or a
splat constant moved into a group whose view reads a recomputed value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fusec.analysis.fusion_legality as legality
from fusec.analysis.diagnostics import FusecError
from fusec.compiler.cli import main
from fusec.compiler.compile import compile_model
from fusec.fuzz.generate import GenConfig
from fusec.fuzz.modes import MODES

# exp is read by a gather feeding a reduction and by a neg returned beside it
GATHER_IN_REDUCTION = """
func.func @f(%x: tensor<2x2xf32>, %i: tensor<2xi64>) -> (tensor<2xf32>, tensor<2x2xf32>) {
  %c = nn.exp %x : tensor<2x2xf32>
  %g = nn.gather %c, %i {axis = 0} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %s = nn.reduce_sum %g {axes = [0]} : (tensor<2x2xf32>) -> tensor<2xf32>
  %n = nn.neg %c : tensor<2x2xf32>
  func.return %s, %n : tensor<2xf32>, tensor<2x2xf32>
}
"""

# the gathered row broadcasts against abs(exp(x)) over the whole table
GATHER_IN_POINTWISE = """
func.func @f(%x: tensor<4x2xf32>, %i: tensor<1xi64>) -> tensor<4x2xf32> {
  %a = nn.exp %x : tensor<4x2xf32>
  %g = nn.gather %a, %i {axis = 0} : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
  %n = nn.abs %a : tensor<4x2xf32>
  %y = nn.mul %n, %g : (tensor<4x2xf32>, tensor<1x2xf32>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}
"""

# the dead %d keeps sink-transposes from moving the transpose, dce drops it
TRANSPOSE_OF_RECOMPUTED = """
func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %t = nn.tanh %x : tensor<2x3xf32>
  %d = nn.neg %t : tensor<2x3xf32>
  %r = nn.transpose %t {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %y = nn.neg %r : tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}
"""

# group-each-op moves the splat %c into the group whose views read mul
SPLAT_UNDER_LAYOUT_CHAIN = """
func.func @f(%x: tensor<4x4x3xf32>) -> tensor<1x1x2xf32> {
  %c = nn.constant dense<-1.5> : tensor<4x4x3xf32>
  %m = nn.mul %c, %x : (tensor<4x4x3xf32>, tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
  %s = nn.slice %m {starts = [1, 0, 0], limits = [2, 3, 2], strides = [1, 2, 2]}
      : (tensor<4x4x3xf32>) -> tensor<1x2x1xf32>
  %t = nn.transpose %s {perm = [2, 0, 1]} : (tensor<1x2x1xf32>) -> tensor<1x1x2xf32>
  func.return %t : tensor<1x1x2xf32>
}
"""

SPLAT_UNDER_REDUCTION_VIEW = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %c = nn.constant dense<1.5> : tensor<4x8xf32>
  %m = nn.mul %x, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = nn.slice %m {starts = [0, 0], limits = [4, 4]} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %s = nn.reduce_sum %t {axes = [1], keepdims = true} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  func.return %s : tensor<4x1xf32>
}
"""

# (program, kernels with fusion, the remark that says what was not recomputed)
CASES = {
    "gather_in_reduction": (GATHER_IN_REDUCTION, 2,
                            "missed: nn.exp (%c) not recomputed in group g1: cannot read "
                            "nn.gather in a reduction kernel: nn.gather would read nn.exp"),
    "gather_in_pointwise": (GATHER_IN_POINTWISE, 2,
                            "missed: nn.exp (%a) not recomputed in group g1: cannot generate "
                            "this pointwise group: nn.gather would read nn.exp"),
    "transpose_of_recomputed": (TRANSPOSE_OF_RECOMPUTED, 2,
                                "missed: nn.tanh (%t) not recomputed in group g0: cannot "
                                "generate this pointwise group: the transpose of nn.tanh"),
    "splat_under_layout_chain": (SPLAT_UNDER_LAYOUT_CHAIN, 1, ""),
    "splat_under_reduction_view": (SPLAT_UNDER_REDUCTION_VIEW, 1, ""),
}


def _compile(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
             *flags: str) -> tuple[Path, str]:
    """`fusec MODEL -o OUT FLAGS`: OUT and what it printed on stderr."""
    model = tmp_path / "model.mlir"
    model.write_text(text)
    out = tmp_path / ("out" + "".join(flags).replace("-", "_"))
    code = main([str(model), "-o", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    return out, err


def _launches(out: Path) -> int:
    return len(json.loads((out / "plan.json").read_text())["functions"]["f"]["launches"])


def _run_check(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fusec run OUT --check` in the simulator on random inputs."""
    code = main(["run", str(out), "--check", "--device", "sim", "--seed", "5"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "check passed" in printed.out + printed.err


@pytest.mark.parametrize("name", list(CASES))
def test_fused_compile_accepts_what_unfused_accepts(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unfused and fused compile; the fused one has the expected kernels,
    says why it did not recompute, and matches the reference."""
    text, kernels, remark = CASES[name]
    unfused, _ = _compile(tmp_path, capsys, text, "--no-fusion")
    out, err = _compile(tmp_path, capsys, text, "--remarks")
    assert _launches(out) == kernels < _launches(unfused), (out / "kernels.py").read_text()
    assert remark in err
    assert "split into one kernel per op" not in err  # legality saw it: no split was needed
    _run_check(out, capsys)


NET_CASES = {  # with legality's recompute check off: the group split, kernels
    "gather_in_reduction": ("g1", "cannot read nn.gather in a reduction kernel", 4),
    "gather_in_pointwise": ("g1", "cannot generate this pointwise group: nn.gather", 4),
    "transpose_of_recomputed": ("g0", "the transpose of nn.tanh would read a value", 3),
}


@pytest.mark.parametrize("name", list(NET_CASES))
def test_a_group_the_writer_refuses_is_split(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When legality lets a recomputation through that the writer cannot
    emit, form-fusion-groups splits the group, one kernel per op, and says
    why: the compile succeeds and the numbers match."""
    monkeypatch.setattr(legality, "recompute_read_refusal", lambda *args: None)
    group, reason, kernels = NET_CASES[name]
    out, err = _compile(tmp_path, capsys, CASES[name][0], "--remarks")
    assert (f"missed: group {group} split into one kernel per op before code generation: "
            in err), err
    assert reason in err.split("split into one kernel per op")[1]
    assert _launches(out) == kernels
    _run_check(out, capsys)


# The fuzzer's `recompute` mode (`fuzz/reuse_graphs.py`): a value read by two
# to four consumers, directly and through gather, transpose, reshape and
# slice chains, now and then by a dead one. Before the fix the fused compile
# refused 8 of these 100 programs (gathers, slices, reshapes and transposes
# of recomputed values, in pointwise and reduction kernels).
PROPERTY_SEED = 5
PROPERTY_PROGRAMS = 100


@pytest.mark.slow
def test_random_programs_unfused_accepted_means_fused_accepted() -> None:
    """Each program of the fixed batch the unfused compile accepts, the
    fused compile accepts too."""
    mode = MODES["recompute"]
    refused: list[str] = []
    for index in range(PROPERTY_PROGRAMS):
        graph = mode.graph(mode.rng(PROPERTY_SEED, index), mode.config(GenConfig(), "small"))
        text = graph.text()
        try:
            compile_model(text, fusion=False)
        except FusecError:
            continue  # not this property's business
        try:
            compile_model(text, fusion=True)
        except FusecError as err:
            refused.append(f"program {index}: {err.message.splitlines()[0]}\n{text}")
    assert not refused, "\n".join(refused)
