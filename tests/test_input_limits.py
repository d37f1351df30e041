"""Inputs at or past fusec's limits: each is a clear error before anything is
written (an option's `fusec: error:` line, or a located `file:line:col: error:`),
never an internal error or a program that compiles and then cannot run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fusec.command import main

VALID = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`fusec ARGS` in-process: exit code (argparse's SystemExit too) and stderr."""
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.mlir"
    path.write_text(VALID)
    return path


@pytest.mark.parametrize(("args", "prefix", "option"), [
    (["--max-registers", "-5"], "fusec", "--max-registers"),
    (["--shared-memory-limit", "-1"], "fusec", "--shared-memory-limit"),
    (["--max-registers", "many"], "fusec", "--max-registers"),
])
def test_negative_compile_options(capsys: pytest.CaptureFixture[str], model: Path,
                                  tmp_path: Path, args: list[str], prefix: str,
                                  option: str) -> None:
    code, err = run_main(capsys, str(model), "-o", str(tmp_path / "out"), *args)
    assert code == 1
    assert f"{prefix}: error: argument {option}: " in err
    assert not (tmp_path / "out").exists()


def test_negative_seed(capsys: pytest.CaptureFixture[str], model: Path) -> None:
    code, err = run_main(capsys, "run", str(model), "--seed", "-3")
    assert code == 1
    assert "fusec run: error: argument --seed: must be a non-negative integer, not -3" in err


def test_negative_params_above(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = run_main(capsys, "import", str(tmp_path / "m.onnx"), "-o",
                         str(tmp_path / "m.mlir"), "--params-above", "-1")
    assert code == 1
    assert "fusec import: error: argument --params-above: must be a non-negative" in err


@pytest.mark.parametrize("suffix", ["", ".mlir", ".dot"])
def test_output_name_too_long(capsys: pytest.CaptureFixture[str], model: Path,
                              tmp_path: Path, suffix: str) -> None:
    """A name the file system refuses is the user's error, naming the path."""
    name = tmp_path / ("a" * 300 + suffix)
    extra = ["--emit", "dot"] if suffix == ".dot" else []
    code, err = run_main(capsys, str(model), "-o", str(name), *extra)
    assert code == 1
    assert err.startswith(f"fusec: error: cannot use '{name}': "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mlir"]


def _relu_of_rank(rank: int) -> str:
    t = "tensor<" + "1x" * rank + "f32>"
    return (f"func.func @f(%a: {t}) -> {t} {{\n  %b = nn.relu %a : {t}\n"
            f"  func.return %b : {t}\n}}\n")


def test_rank_over_the_maximum_is_a_located_error(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """A rank-300 tensor compiled, then could not run (NumPy's limit)."""
    path = tmp_path / "r.mlir"
    path.write_text(_relu_of_rank(300))
    code, err = run_main(capsys, str(path), "-o", str(tmp_path / "out"))
    assert code == 1
    assert err.startswith(f"{path}:1:1: error: argument #0 of @f has 300 dimensions; "
                          "at most 32 are supported"), err
    assert not (tmp_path / "out").exists()


def test_rank_at_the_maximum_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "r.mlir"
    path.write_text(_relu_of_rank(32))
    code, err = run_main(capsys, "run", str(path), "--device", "sim", "--check")
    assert code == 0, err


def _nested_modules(depth: int) -> str:
    body = ("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  %b = nn.relu %a : tensor<4xf32>\n  func.return %b : tensor<4xf32>\n}\n")
    return "builtin.module {\n" * depth + body + "}\n" * depth


def _dense_of_depth(depth: int, attr: bool = False) -> str:
    literal = "[" * depth + "1.0" + "]" * depth
    if attr:  # a nested array attribute: no explicit limit, the safety net
        return ("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                f"  %b = nn.relu %a {{x = {literal}}} : tensor<4xf32>\n"
                "  func.return %b : tensor<4xf32>\n}\n")
    t = "tensor<" + "1x" * depth + "f32>"
    return (f"func.func @f() -> {t} {{\n  %0 = nn.constant dense<{literal}> : {t}\n"
            f"  func.return %0 : {t}\n}}\n")


@pytest.mark.parametrize(("text", "where", "message"), [
    (_nested_modules(2000), "33:16", "regions are nested more than 32 deep"),
    (_dense_of_depth(3000), "2:20",
     "'nn.constant' has an invalid value: dense literal nested more than 32 deep"),
    (_dense_of_depth(3000, attr=True), "2:", "the input is nested too deeply to parse"),
], ids=["modules", "dense", "attribute"])
def test_deep_nesting_is_a_located_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         text: str, where: str, message: str) -> None:
    """Deep nesting was a RecursionError (an internal error)."""
    path = tmp_path / "n.mlir"
    path.write_text(text)
    code, err = run_main(capsys, str(path), "-o", str(tmp_path / "out"))
    assert code == 1
    head = err.split("\n")[0]
    assert head.startswith(f"{path}:{where}") and message in head, head
    assert not (tmp_path / "out").exists()


def test_nesting_within_the_limits_compiles(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    path = tmp_path / "n.mlir"
    path.write_text(_dense_of_depth(32))
    code, err = run_main(capsys, "run", str(path), "--device", "sim", "--check")
    assert code == 0, err
    path.write_text(_nested_modules(31))
    code, err = run_main(capsys, str(path), "-p", "decompose")
    assert code == 0, err


BF16_MATMUL = """\
func.func @f(%a: tensor<16x16xbf16>, %b: tensor<16x16xbf16>) -> tensor<16x16xbf16> {
  %c = nn.matmul %a, %b : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
  func.return %c : tensor<16x16xbf16>
}
"""


@pytest.mark.parametrize("gemm", ["auto", "library", "fused"])
def test_bf16_matmul_compiles(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                              gemm: str) -> None:
    """tile-and-promote crashed on the GEMM choice of a bf16 matmul; cuBLAS
    through CuPy has no bf16, so every mode gives the fused kernel."""
    path = tmp_path / "bf.mlir"
    path.write_text(BF16_MATMUL)
    code, err = run_main(capsys, str(path), "-o", str(tmp_path / "out"), "--gemm", gemm)
    assert code == 0, err
    assert "f32_to_bf16(" in (tmp_path / "out" / "kernels.py").read_text()


def _concat_model(n: int) -> str:
    args = ", ".join(f"%a{i}: tensor<2x1xf32>" for i in range(n))
    operands = ", ".join(f"%a{i}" for i in range(n))
    types = ", ".join(["tensor<2x1xf32>"] * n)
    return (f"func.func @f({args}) -> tensor<2x{n}xf32> {{\n"
            f"  %c = nn.concat {operands} {{axis = 1}} : ({types}) -> tensor<2x{n}xf32>\n"
            f"  func.return %c : tensor<2x{n}xf32>\n}}\n")


@pytest.mark.slow  # about 13 s: 5000 operands through the whole pipeline
def test_concat_of_5000_operands_compiles_to_loadable_kernels(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One kernel of 5,000 arguments and an `elif` chain Python cannot parse
    became a tree of concats of at most 32 operands each."""
    path = tmp_path / "cat.mlir"
    path.write_text(_concat_model(5000))
    code, err = run_main(capsys, str(path), "-o", str(tmp_path / "out"))
    assert code == 0, err
    source = (tmp_path / "out" / "kernels.py").read_text()
    tree = ast.parse(source)  # RecursionError before the split
    kernels = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
    assert len(kernels) == 157 + 5 + 1  # 5000 -> 157 concats -> 5 -> 1
    assert max(len(f.args.args) for f in kernels) == 32 + 1  # operands and the result


def test_split_concat_keeps_the_values(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    path = tmp_path / "cat.mlir"
    path.write_text(_concat_model(70))
    code, err = run_main(capsys, "run", str(path), "--device", "sim", "--check")
    assert code == 0, err  # --check compares with the reference interpreter


def test_split_concat_pass_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "cat.mlir"
    path.write_text(_concat_model(5))
    assert main([str(path), "-p", "decompose{max_concat_operands=2}"]) == 0
    lines = [x for x in capsys.readouterr().out.split("\n") if "nn.concat" in x]
    # 5 -> [2, 2, 1] -> [2 parts, 1] -> 1: four concats of two operands each.
    assert len(lines) == 4
    assert all(x.count("%") == 3 for x in lines), lines
    code, err = run_main(capsys, str(path), "-p", "decompose{max-concat-operands=1}")
    assert code == 1 and "option 'max-concat-operands': must be at least 2" in err, err
