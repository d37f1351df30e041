"""User passes: installed entry points (`fusec.passes`) and `--load-pass-plugin`
files, including every way loading them can go wrong.

The entry-point path is tested with a fake entry point (monkeypatched
`fusec.compiler.registry.entry_points`) whose pass is the worked example of
docs/writing-passes.md.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from xdsl.passes import ModulePass

from fusec.analysis.diagnostics import FusecError
from fusec.compiler import cli
from fusec.compiler.driver import make_registry
from fusec.compiler.pipeline import parse_pipeline_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "fold_double_neg.py"

MODEL = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = nn.neg %x : tensor<4xf32>
  %b = nn.neg %a : tensor<4xf32>
  %e = nn.exp %b : tensor<4xf32>
  func.return %e : tensor<4xf32>
}
"""


def load_example() -> ModuleType:
    """The docs example as a module of its own (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("fold_double_neg_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolves string annotations through sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class FakeEntryPoint:
    """What `importlib.metadata.entry_points` yields, as far as fusec uses it."""

    name: str
    value: str
    cls: type[ModulePass]

    def load(self) -> type[ModulePass]:
        return self.cls


def install(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> None:
    """Make `eps` look like installed packages' `fusec.passes` entry points."""

    def fake_entry_points(*, group: str) -> list[FakeEntryPoint]:
        return list(eps) if group == "fusec.passes" else []

    monkeypatch.setattr("fusec.compiler.registry.entry_points", fake_entry_points)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


@pytest.fixture
def example_pass() -> type[ModulePass]:
    return load_example().FoldDoubleNegPass


# --- entry points -------------------------------------------------------------------------


def test_entry_point_pass_is_listed(
    monkeypatch: pytest.MonkeyPatch, example_pass: type[ModulePass]
) -> None:
    install(monkeypatch, FakeEntryPoint("fold-double-neg", "my_pkg.fold:Pass", example_pass))
    registry = make_registry([])
    assert "fold-double-neg" in registry.factories
    assert registry.origins["fold-double-neg"] == "package entry point 'my_pkg.fold:Pass'"
    assert registry.get("fold-double-neg") is example_pass
    doc = inspect.getdoc(registry.get("fold-double-neg")) or ""
    assert doc.startswith("Fold nn.neg(nn.neg(x)) to x.")


def test_entry_point_pass_runs_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    model: Path,
    example_pass: type[ModulePass],
) -> None:
    install(monkeypatch, FakeEntryPoint("fold-double-neg", "my_pkg.fold:Pass", example_pass))
    code, out, err = run_cli([str(model), "-p", "fold-double-neg"], capsys)
    assert code == 0, err
    assert "nn.neg" not in out
    assert "%e = nn.exp %x : tensor<4xf32>" in out


def test_entry_point_pass_takes_options(
    monkeypatch: pytest.MonkeyPatch, example_pass: type[ModulePass]
) -> None:
    install(monkeypatch, FakeEntryPoint("fold-double-neg", "my_pkg.fold:Pass", example_pass))
    (p,) = parse_pipeline_spec(make_registry([]), "fold-double-neg{erase-dead=false}")
    assert p == example_pass(erase_dead=False)  # pyright: ignore[reportCallIssue]


def test_entry_point_clashing_with_a_builtin(
    monkeypatch: pytest.MonkeyPatch, example_pass: type[ModulePass]
) -> None:
    install(monkeypatch, FakeEntryPoint("decompose", "my_pkg.fold:Pass", example_pass))
    message = ("pass 'decompose' from package entry point 'my_pkg.fold:Pass' clashes with "
               "the pass of the same name from fusec")
    with pytest.raises(FusecError, match=re.escape(message)):
        make_registry([])


def test_entry_point_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(FakeEntryPoint):
        def load(self) -> type[ModulePass]:
            raise ModuleNotFoundError("No module named 'my_pkg'")

    install(monkeypatch, Broken("broken-pass", "my_pkg.broken:Pass", ModulePass))
    registry = make_registry([])
    with pytest.raises(FusecError, match="broken-pass"):
        registry.get("broken-pass")


# --- plugin files ------------------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_plugin_file_registers_its_passes() -> None:
    names = make_registry([]).load_plugin(str(EXAMPLE))
    assert names == ["fold-double-neg"]


def test_plugin_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.py")
    with pytest.raises(FusecError, match=r"cannot load pass plugin '.*nope\.py': no such file"):
        make_registry([missing])


def test_plugin_without_a_pass(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.py", "from xdsl.passes import ModulePass\nX = 1\n")
    with pytest.raises(FusecError, match="defines no ModulePass subclass with a name"):
        make_registry([path])


def test_plugin_that_raises_on_import(tmp_path: Path) -> None:
    path = write(tmp_path, "boom.py", "raise RuntimeError('boom')\n")
    with pytest.raises(FusecError, match=r"cannot load pass plugin '.*boom\.py': "
                       "RuntimeError: boom"):
        make_registry([path])


def test_plugin_with_a_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "syntax.py", "def oops(:\n")
    with pytest.raises(FusecError, match=r"cannot load pass plugin .*SyntaxError"):
        make_registry([path])


CLASHING_PLUGIN = """
from dataclasses import dataclass
from xdsl.passes import ModulePass

@dataclass(frozen=True)
class MyDecompose(ModulePass):
    name = "decompose"

    def apply(self, ctx, op):
        pass
"""


def test_plugin_name_clash_with_a_builtin(tmp_path: Path) -> None:
    path = write(tmp_path, "clash.py", CLASHING_PLUGIN)
    message = f"pass 'decompose' from plugin '{path}' clashes with the pass of the same name"
    with pytest.raises(FusecError, match=re.escape(message) + " from fusec"):
        make_registry([path])


def test_plugin_loaded_twice_clashes_with_itself() -> None:
    with pytest.raises(FusecError, match="clashes with the pass of the same name from plugin"):
        make_registry([str(EXAMPLE), str(EXAMPLE)])


def test_plugin_errors_exit_1_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: Path
) -> None:
    path = write(tmp_path, "boom.py", "raise RuntimeError('boom')\n")
    code, out, err = run_cli([str(model), "--load-pass-plugin", path, "-p", "decompose"], capsys)
    assert code == 1
    assert out == ""
    assert err.startswith(f"error: cannot load pass plugin '{path}': RuntimeError: boom")
    assert "internal error" not in err


# --- errors raised by a user pass -----------------------------------------------------------

ERRORING_PLUGIN = """
from dataclasses import dataclass
from xdsl.passes import ModulePass
from fusec.analysis.diagnostics import op_error
from fusec.dialects import nn

@dataclass(frozen=True)
class NoExp(ModulePass):
    name = "no-exp"

    def apply(self, ctx, op):
        for inner in op.walk():
            if isinstance(inner, nn.ExpOp):
                raise op_error(inner, "'nn.exp' op is not allowed here")
"""

CRASHING_PLUGIN = """
from dataclasses import dataclass
from xdsl.passes import ModulePass

@dataclass(frozen=True)
class Crash(ModulePass):
    name = "crash"

    def apply(self, ctx, op):
        raise KeyError("oops")
"""


def test_op_error_in_a_user_pass_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: Path
) -> None:
    path = write(tmp_path, "no_exp.py", ERRORING_PLUGIN)
    code, _, err = run_cli([str(model), "--load-pass-plugin", path, "-p", "no-exp"], capsys)
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"{model}:4:3: error: 'nn.exp' op is not allowed here"
    assert lines[1] == "  %e = nn.exp %b : tensor<4xf32>"
    assert lines[2] == "  ^"


def test_crash_in_a_user_pass_is_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: Path
) -> None:
    path = write(tmp_path, "crash.py", CRASHING_PLUGIN)
    code, _, err = run_cli([str(model), "--load-pass-plugin", path, "-p", "crash"], capsys)
    assert code == 1
    assert "internal error in pass 'crash': KeyError" in err


@pytest.fixture(autouse=True)
def _forget_plugin_modules() -> None:
    """Plugins are imported under generated names; drop them between tests."""
    before = set(sys.modules)
    yield  # type: ignore[misc]
    for name in set(sys.modules) - before:
        if name.startswith(("fusec_plugin_", "fold_double_neg_example")):
            del sys.modules[name]
