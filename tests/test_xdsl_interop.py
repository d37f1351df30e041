"""fusec's dialects and passes in stock xDSL tools, xDSL's generic passes in
fusec, and fusec's own context without the universe.

pyproject declares `[project.entry-points."xdsl.universe"] fusec =
"fusec.compiler.universe:FUSEC_UNIVERSE"`, so `xdsl-opt` finds `nn` and
`fusion`. fusec's driver loads the dialects itself (`make_context`) and must
not also pull them in through that universe: xDSL refuses a dialect loaded twice.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from xdsl.traits import Pure, is_side_effect_free
from xdsl.universe import Universe

from fusec.compiler.driver import make_registry, module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import parse_pipeline_spec
from fusec.compiler.registry import BUILTIN_PASSES, XDSL_PASSES
from fusec.compiler.universe import FUSEC_UNIVERSE
from fusec.dialects.fusion import Fusion
from fusec.dialects.nn import NN

MODEL = """\
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = nn.softmax %x {axis = -1} : tensor<4x8xf32>
  %g = fusion.group (%y, %b) {kind = "pointwise"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%ya: tensor<4x8xf32>, %ba: tensor<8xf32>):
    %s = nn.add %ya, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %c = nn.constant dense<0.5> : tensor<f32>
    %r = nn.mul %s, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    fusion.yield %r : tensor<4x8xf32>
  }
  func.return %g : tensor<4x8xf32>
}
"""


def xdsl_opt(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the `xdsl-opt` that came with xdsl on `path`."""
    exe = shutil.which("xdsl-opt") or str(Path(sys.executable).parent / "xdsl-opt")
    if not Path(exe).exists():
        pytest.skip("xdsl-opt is not installed")
    return subprocess.run(
        [exe, str(path), *args], capture_output=True, text=True, check=False, timeout=120
    )


def fusec_print(text: str) -> str:
    return module_to_text(parse_module(make_context(), text, "model.mlir"))


def test_entry_point_is_declared() -> None:
    (ep,) = [ep for ep in entry_points(group="xdsl.universe") if ep.name == "fusec"]
    assert ep.value == "fusec.compiler.universe:FUSEC_UNIVERSE"
    assert ep.load() is FUSEC_UNIVERSE


def test_universe_hands_out_fusec_dialects() -> None:
    assert FUSEC_UNIVERSE.all_dialects["nn"]() is NN
    assert FUSEC_UNIVERSE.all_dialects["fusion"]() is Fusion
    assert "nn" in Universe.get_multiverse().all_dialects


def test_xdsl_opt_parses_and_prints_a_fusec_model(tmp_path: Path) -> None:
    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    proc = xdsl_opt(model)
    assert proc.returncode == 0, proc.stderr
    assert "nn.softmax %x {axis = -1} : tensor<4x8xf32>" in proc.stdout
    assert "fusion.group (%y, %b)" in proc.stdout
    # Same custom syntax either way: xdsl-opt's output is fusec's output.
    assert fusec_print(proc.stdout) == fusec_print(MODEL)


def test_xdsl_opt_generic_form_reads_back_in_fusec(tmp_path: Path) -> None:
    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    proc = xdsl_opt(model, "--print-op-generic")
    assert proc.returncode == 0, proc.stderr
    assert '"nn.softmax"' in proc.stdout
    assert fusec_print(proc.stdout) == fusec_print(MODEL)


def test_xdsl_opt_runs_the_nn_verifiers(tmp_path: Path) -> None:
    model = tmp_path / "bad.mlir"
    model.write_text(
        "func.func @f(%x: tensor<4x8xf32>, %b: tensor<7xf32>) -> tensor<4x8xf32> {\n"
        "  %y = nn.add %x, %b : (tensor<4x8xf32>, tensor<7xf32>) -> tensor<4x8xf32>\n"
        "  func.return %y : tensor<4x8xf32>\n"
        "}\n"
    )
    proc = xdsl_opt(model)
    assert proc.returncode != 0
    assert "do not broadcast" in proc.stdout + proc.stderr


def test_loading_a_dialect_twice_raises() -> None:
    # Why make_context must not also load the universe's copy of nn.
    ctx = make_context()
    with pytest.raises(Exception, match="nn"):
        ctx.load_dialect(NN)


def test_make_context_does_not_use_the_universe(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden() -> Universe:
        raise AssertionError("make_context went through the xdsl.universe entry points")

    monkeypatch.setattr(Universe, "get_multiverse", staticmethod(forbidden))
    monkeypatch.setattr(FUSEC_UNIVERSE, "all_dialects", {})
    ctx = make_context()
    assert ctx.get_optional_dialect("nn") is NN
    assert ctx.get_optional_dialect("fusion") is Fusion
    assert "fusion.group" in module_to_text(parse_module(ctx, MODEL, "model.mlir"))


# --- passes both ways ---------------------------------------------------------------------

TWICE = """\
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = nn.exp %x : tensor<4x8xf32>
  %b = nn.exp %x : tensor<4x8xf32>
  %dead = nn.tanh %a : tensor<4x8xf32>
  %s = nn.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = nn.softmax %s {axis = -1} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""


def test_universe_hands_out_fusec_passes() -> None:
    assert set(FUSEC_UNIVERSE.all_passes) == set(BUILTIN_PASSES)
    for name, load in FUSEC_UNIVERSE.all_passes.items():
        assert load().name == name
    assert "form-fusion-groups" in Universe.get_multiverse().all_passes


def test_xdsl_opt_runs_fusec_passes_beside_its_own(tmp_path: Path) -> None:
    model = tmp_path / "model.mlir"
    model.write_text(TWICE)
    proc = xdsl_opt(model, "-p", "decompose,cse,dce,form-fusion-groups{target=h200}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("fusion.group (") == 1
    assert proc.stdout.count("= nn.exp ") == 2  # one of the duplicates, and the softmax's
    assert "nn.tanh" not in proc.stdout and "nn.softmax" not in proc.stdout


@pytest.mark.parametrize("name", sorted(XDSL_PASSES))
def test_xdsl_generic_passes_run_in_fusec(name: str) -> None:
    registry = make_registry([])
    assert registry.origins[name] == "xdsl"
    (p,) = parse_pipeline_spec(registry, name)
    module = parse_module(make_context(), TWICE, "model.mlir")
    p.apply(make_context(), module)
    text = module_to_text(module)
    assert "nn.tanh" not in text  # all three remove dead ops
    assert text.count("nn.exp") == (1 if name == "cse" else 2)


def test_every_nn_op_is_pure() -> None:
    # What lets xDSL's cse and dce work on nn: no memory effects, speculatable.
    for op_cls in NN.operations:
        assert op_cls.has_trait(Pure), op_cls.name
    module = parse_module(make_context(), TWICE, "model.mlir")
    for op in module.walk():
        if op.name.startswith("nn."):
            assert is_side_effect_free(op), op.name
