"""The `fusec` command line on bad input: every mistake a user can make is one
clear `error:` line (with `file:line:col`, the source line and a caret where
there is a place to point at), exit code 1, no Python traceback, and no output
file. Most cases call `main()` in-process (fast); a few run the real process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fusec.compiler.cli import main
from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import InternalPassError

PLUGIN = Path(__file__).parent / "filecheck" / "Inputs" / "cli_passes.py"

VALID = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""


@dataclass
class Result:
    """Exit code and captured streams of one fusec run."""

    code: int
    out: str
    err: str


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    """`fusec ARGS` in-process; argparse's SystemExit counts as the exit code."""
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_process(*args: str, stdin: bytes | None = None) -> Result:
    """`fusec ARGS` as its own Python process."""
    proc = subprocess.run(
        [sys.executable, "-m", "fusec.compiler.cli", *args],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def assert_user_error(result: Result, first_line: str) -> list[str]:
    """Exit 1, nothing on stdout, no traceback, and stderr starting with
    `first_line`; returns stderr's lines for further checks."""
    assert result.code == 1, result
    assert result.out == ""
    assert "Traceback" not in result.err
    lines = result.err.rstrip("\n").split("\n")
    assert lines[0] == first_line, result.err
    return lines


# --- bad programs: located errors, nothing written ----------------------------------

# (case id, program text, line, column, message)
BAD_PROGRAMS = [
    (
        "syntax-error",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = nn.exp %x tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n",
        2, 18, "Expected ':' before the type of 'nn.exp'",
    ),
    (
        "unknown-op",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = nn.relu6 %x : tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n",
        2, 8, "unknown op 'nn.relu6'; did you mean 'nn.relu'?",
    ),
    (
        "wrong-operand-count",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = nn.add %x : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n",
        2, 15, "'nn.add' expects 2 operands, got 1",
    ),
    (
        "verifier-rule",
        "func.func @f(%x: tensor<4x8xf32>, %y: tensor<3xf32>) -> tensor<4x8xf32> {\n"
        "  %0 = nn.add %x, %y : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>\n"
        "  func.return %0 : tensor<4x8xf32>\n}\n",
        2, 3,
        "'nn.add' op shapes 4x8, 3 do not broadcast (dimension -1 has sizes [3, 8])",
    ),
    (
        "use-before-definition",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %a = nn.exp %b : tensor<4xf32>\n"
        "  %b = nn.exp %x : tensor<4xf32>\n"
        "  func.return %a : tensor<4xf32>\n}\n",
        2, 3, "'nn.exp' op uses %b before it is defined",
    ),
    (
        "cycle",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %a = nn.exp %b : tensor<4xf32>\n"
        "  %b = nn.exp %a : tensor<4xf32>\n"
        "  func.return %b : tensor<4xf32>\n}\n",
        2, 3,
        "'nn.exp' op uses %b, which depends on this op's own result: the operands form a cycle",
    ),
    (
        "undefined-value",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = nn.exp %y : tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n",
        2, 15, "use of undefined value %y",
    ),
    (
        "dynamic-signature",
        "func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {\n"
        "  func.return %x : tensor<?x4xf32>\n}\n",
        1, 1,
        "dynamic shapes are not supported: argument #0 of @f has type tensor<?x4xf32>",
    ),
    (
        "dynamic-op",
        "func.func @f(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {\n"
        "  %0 = nn.reshape %x : (tensor<8x4xf32>) -> tensor<?x4xf32>\n"
        "  %1 = nn.reshape %0 : (tensor<?x4xf32>) -> tensor<8x4xf32>\n"
        "  func.return %1 : tensor<8x4xf32>\n}\n",
        2, 3,
        "'nn.reshape' op dynamic shapes are not supported: the result has type tensor<?x4xf32>",
    ),
    (
        "unsupported-element-type",
        "func.func @f(%x: tensor<4xi8>) -> tensor<4xi8> {\n"
        "  func.return %x : tensor<4xi8>\n}\n",
        1, 1,
        "element type i8 is not supported (argument #0 of @f has type tensor<4xi8>); "
        "use one of bf16, f16, f32, f64, i1, i32, i64",
    ),
    (
        "duplicate-function",
        VALID + VALID.replace("%0", "%1"),
        5, 1, "'func.func' op redefines @f (first defined at {path}:1:1)",
    ),
    (
        "unclosed-region",
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  func.return %x : tensor<4xf32>\n",
        1, 50, "this '{' is never closed: the input ends before its '}'",
    ),
    (
        "comments-only",
        "// nothing but a comment\n",
        2, 1, "the input holds no operations: expected a module of func.func functions",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "col", "message"),
    [case[1:] for case in BAD_PROGRAMS],
    ids=[case[0] for case in BAD_PROGRAMS],
)
def test_bad_program_is_a_located_error(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    text: str,
    line: int,
    col: int,
    message: str,
) -> None:
    src = tmp_path / "bad.mlir"
    src.write_text(text)
    out = tmp_path / "out.mlir"
    result = run_main(capsys, str(src), "-p", "", "-o", str(out))
    lines = assert_user_error(
        result, f"{src}:{line}:{col}: error: " + message.replace("{path}", str(src))
    )
    # The offending source line and a caret under the reported column.
    source_lines = text.split("\n")
    assert lines[1] == source_lines[line - 1]
    assert lines[2].startswith(" " * (col - 1) + "^")
    assert sorted(tmp_path.iterdir()) == [src], "a failed run must write nothing"


def test_split_input_error_in_a_later_section_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "two.mlir"
    src.write_text(VALID + "// -----\n" + VALID.replace("nn.exp %x", "nn.exp %y"))
    out = tmp_path / "out.mlir"
    result = run_main(capsys, str(src), "-p", "", "--split-input-file", "-o", str(out))
    assert_user_error(result, f"{src}:7:15: error: use of undefined value %y")
    assert not out.exists()


# --- bad files -------------------------------------------------------------------------


def test_empty_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "empty.mlir"
    src.write_bytes(b"")
    result = run_main(capsys, str(src), "-p", "")
    assert_user_error(
        result, f"error: '{src}' is empty: expected an MLIR module of func.func functions"
    )


def test_non_utf8_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "latin1.mlir"
    src.write_bytes(VALID.encode().replace(b"@f", b"@f\xe9", 1))
    out = tmp_path / "out.mlir"
    result = run_main(capsys, str(src), "-p", "", "-o", str(out))
    assert_user_error(result, f"{src}:1:13: error: the file is not valid UTF-8 (byte 0xe9)")
    assert not out.exists()


def test_missing_input_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.mlir"
    result = run_main(capsys, str(missing), "-p", "")
    assert_user_error(result, f"error: cannot read '{missing}': no such file")


def test_directory_as_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = run_main(capsys, str(tmp_path), "-p", "")
    assert_user_error(result, f"error: cannot read '{tmp_path}': it is a directory")


# --- bad outputs -------------------------------------------------------------------------


def test_output_in_a_missing_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    out = tmp_path / "no_such_dir" / "x.mlir"
    result = run_main(capsys, str(src), "-p", "", "-o", str(out))
    assert_user_error(
        result,
        f"error: cannot write '{out}': the directory '{out.parent}' does not exist",
    )
    assert not out.parent.exists()


def test_output_is_an_existing_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    # A name ending in .mlir asks for the IR, so the directory is in the way.
    target = tmp_path / "taken.mlir"
    target.mkdir()
    result = run_main(capsys, str(src), "-p", "", "-o", str(target))
    assert_user_error(result, f"error: cannot write '{target}': it is a directory")
    assert list(target.iterdir()) == []


def test_pipeline_with_output_directory_is_the_compile_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # -p SPEC -o OUT compiles with SPEC; one that leaves ops outside any group
    # cannot be compiled, and says so at the op.
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    target = tmp_path / "out"
    result = run_main(capsys, str(src), "-p", "decompose", "-o", str(target))
    assert_user_error(result, f"{src}:2:3: error: 'nn.exp' is outside any fusion.group; "
                      "run 'group-each-op' before code generation")
    assert not target.exists()


def test_output_file_is_written_and_stdout_stays_empty(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    out = tmp_path / "out.mlir"
    result = run_main(capsys, str(src), "-p", "", "-o", str(out))
    assert (result.code, result.out, result.err) == (0, "", "")
    assert "nn.exp %x : tensor<4xf32>" in out.read_text()
    # No temporary file is left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.mlir", "out.mlir"]


# --- bad pipelines -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("decompos", "unknown pass 'decompos'; did you mean 'decompose'?"),
        ("no-such-pass", "unknown pass 'no-such-pass'; see --list-passes"),
        (
            "cli-noop{colour=red}",
            "pass 'cli-noop' has no option 'colour' (its options: count, verbose)",
        ),
        ("cli-noop{count=many}", "pass 'cli-noop': option 'count' expects int, got 'many'"),
        ("cli-noop{", "invalid pass pipeline 'cli-noop{': expected argument name here"),
        ("cli-noop,,cli-noop", "invalid pass pipeline 'cli-noop,,cli-noop': "
         "expected pass name here"),
    ],
    ids=["unknown-pass-suggestion", "unknown-pass", "unknown-option", "bad-option-value",
         "unclosed-options", "empty-pass-name"],
)
def test_bad_pipeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pipeline: str, message: str
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    out = tmp_path / "out.mlir"
    result = run_main(
        capsys, str(src), "--load-pass-plugin", str(PLUGIN), "-p", pipeline, "-o", str(out)
    )
    assert_user_error(result, f"error: {message}")
    assert not out.exists()


def test_missing_plugin_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    plugin = tmp_path / "nope.py"
    result = run_main(capsys, str(src), "--load-pass-plugin", str(plugin), "-p", "")
    assert_user_error(result, f"error: cannot load pass plugin '{plugin}': no such file")


# --- bad command lines ---------------------------------------------------------------------


def test_unknown_flag_exits_1_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(capsys, "--no-such-flag")
    assert result.code == 1
    assert result.err.startswith("usage: fusec")
    assert result.err.rstrip().endswith("fusec: error: unrecognized arguments: --no-such-flag")
    assert "Traceback" not in result.err


def test_no_input_file(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(capsys)
    assert_user_error(result, "error: no input file (try 'fusec --help')")


# --- internal errors -------------------------------------------------------------------------


def test_crashing_pass_is_one_line_without_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    out = tmp_path / "out.mlir"
    result = run_main(
        capsys, str(src), "--load-pass-plugin", str(PLUGIN), "-p", "cli-crash", "-o", str(out)
    )
    assert_user_error(
        result,
        "fusec: internal error in pass 'cli-crash': RuntimeError: cli-crash always fails "
        "(rerun with --traceback for details)",
    )
    assert result.err.count("\n") == 1
    assert not out.exists()


def test_traceback_flag_reraises_in_process(tmp_path: Path) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    with pytest.raises(InternalPassError, match="cli-crash always fails"):
        main([str(src), "--load-pass-plugin", str(PLUGIN), "-p", "cli-crash", "--traceback"])


# --- the real process ------------------------------------------------------------------------


def test_process_reports_internal_error_and_traceback_on_request(tmp_path: Path) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    args = [str(src), "--load-pass-plugin", str(PLUGIN), "-p", "cli-crash"]
    plain = run_process(*args)
    assert plain.code == 1
    assert "Traceback" not in plain.err
    assert plain.err.startswith("fusec: internal error in pass 'cli-crash'")
    traced = run_process(*args, "--traceback")
    assert traced.code == 1
    assert "Traceback (most recent call last)" in traced.err
    assert "RuntimeError: cli-crash always fails" in traced.err


def test_process_syntax_error_from_stdin() -> None:
    result = run_process("-", "-p", "", stdin=b"func.func @f( {\n")
    lines = assert_user_error(result, "<stdin>:1:15: error: Expected argument or type")
    assert lines[1:] == ["func.func @f( {", " " * 14 + "^"]


def test_process_bad_flag_and_version() -> None:
    bad = run_process("--no-such-flag")
    assert bad.code == 1
    assert "unrecognized arguments: --no-such-flag" in bad.err
    version = run_process("--version")
    assert version.code == 0
    assert version.out.startswith("fusec ")


# --- one pipeline for every job (issue 16) ------------------------------------------------

SOFTMAX = """\
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %n = nn.neg %x : tensor<4x8xf32>
  %m = nn.neg %n : tensor<4x8xf32>
  %y = nn.softmax %m {axis = -1} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""
EXAMPLE_PLUGIN = Path(__file__).parent.parent / "docs" / "examples" / "fold_double_neg.py"


def without_launch_attributes(model_mlir: str) -> str:
    """OUT/model.mlir less what code generation records on each group after
    the pipeline (`kernel`, `grid`, `block`, `shared_bytes`)."""
    module = parse_module(make_context(), model_mlir, "model.mlir")
    for op in module.walk():
        for key in ("kernel", "grid", "block", "shared_bytes"):
            op.attributes.pop(key, None)
    return module_to_text(module)


def compile_out(capsys: pytest.CaptureFixture[str], tmp_path: Path, *flags: str) -> Path:
    """`fusec SOFTMAX -o OUT FLAGS`; returns OUT."""
    src = tmp_path / "m.mlir"
    src.write_text(SOFTMAX)
    out = tmp_path / "out"
    result = run_main(capsys, str(src), "-o", str(out), *flags)
    assert result.code == 0, result
    return out


def test_compile_job_pipeline_is_recorded_and_replays(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = compile_out(capsys, tmp_path)
    plan = json.loads((out / "plan.json").read_text())
    spec = plan["pipeline"]
    assert spec.startswith("fold-empty,decompose,sink-transposes,unmerge-broadcasts,"
                           "channels-last,cse,dce,fold-constants,fuse-attention")
    assert plan["passes"] == [s.split("{")[0] for s in spec.split(",")]
    assert f"`{spec}`" in (out / "report.md").read_text()
    # The spec printed is the spec run: -p with it prints OUT's IR, and
    # compiles to the same plan.
    replay = run_main(capsys, str(tmp_path / "m.mlir"), "-p", spec)
    assert replay.code == 0, replay
    assert replay.out == without_launch_attributes((out / "model.mlir").read_text())
    again = compile_out(capsys, tmp_path, "--pipeline", spec)  # --pipeline is -p
    assert json.loads((again / "plan.json").read_text()) == plan


def test_default_ir_is_the_compile_jobs_ir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # `-o x.mlir` and plain `fusec MODEL` give the IR the compile job compiles.
    out = compile_out(capsys, tmp_path)
    ir = tmp_path / "final.mlir"
    result = run_main(capsys, str(tmp_path / "m.mlir"), "-o", str(ir))
    assert result.code == 0, result
    assert ir.read_text() == without_launch_attributes((out / "model.mlir").read_text())
    assert "fusion.group" in ir.read_text()
    printed = run_main(capsys, str(tmp_path / "m.mlir"))
    assert printed.out == ir.read_text()


def test_user_pipeline_with_a_plugin_pass_compiles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = "decompose,fold-double-neg,form-fusion-groups,group-each-op"
    out = compile_out(capsys, tmp_path, "--load-pass-plugin", str(EXAMPLE_PLUGIN), "-p", spec)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["passes"] == spec.split(",")
    assert plan["pipeline"] == spec
    assert "nn.neg" not in (out / "model.mlir").read_text()
    assert len(plan["functions"]["f"]["launches"]) == 1


@pytest.mark.parametrize(
    ("flag", "anchor", "expected"),
    [("--insert-after", "decompose", ["decompose", "fold-double-neg", "sink-transposes"]),
     ("--insert-before", "cse", ["channels-last", "fold-double-neg", "cse"]),
     ("--insert-before", "dce", ["cse", "fold-double-neg{erase-dead=false}", "dce"])],
)
def test_insert_a_pass_into_the_default_pipeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, anchor: str,
    expected: list[str],
) -> None:
    added = expected[1]
    out = compile_out(capsys, tmp_path, "--load-pass-plugin", str(EXAMPLE_PLUGIN),
                      flag, f"{anchor}={added}")
    spec = json.loads((out / "plan.json").read_text())["pipeline"].split(",")
    i = spec.index(added)
    assert spec[i - 1:i + 2] == expected
    assert "nn.neg" not in (out / "model.mlir").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--insert-after", "decompose"],
         "error: --insert-after expects NAME=PASS (e.g. --insert-after decompose=my-pass), "
         "got 'decompose'"),
        (["--insert-before", "nope=cse"],
         "error: --insert-before nope=cse: the pipeline has no pass 'nope' (it runs "
         "fold-empty,decompose,sink-transposes,unmerge-broadcasts,channels-last,cse,dce,"
         "fold-constants,fuse-attention,form-fusion-groups,group-each-op,register-budget,tile-and-promote)"),
        (["--insert-after", "decompose=cli-noop{count=x}", "--load-pass-plugin", str(PLUGIN)],
         "error: pass 'cli-noop': option 'count' expects int, got 'x'"),
    ],
    ids=["no-equals", "unknown-anchor", "bad-inserted-option"],
)
def test_bad_insertion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    result = run_main(capsys, str(src), "-o", str(tmp_path / "out"), *args)
    assert_user_error(result, message)
    assert not (tmp_path / "out").exists()


# --- flags never silently ignored ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ptx-info"], "error: --ptx-info acts on compiled kernels: it needs the compile "
         "job (-o OUT, a directory)"),
        (["--register-source", "ptxas", "-o", "x.mlir"], "error: --register-source acts on "
         "compiled kernels: it needs the compile job (-o OUT, a directory)"),
        (["-p", "decompose", "--target", "orin"], "error: --target shapes the default "
         "pipeline, which -p replaces; give the passes their option, e.g. "
         "form-fusion-groups{target=NAME}"),
        (["-p", "decompose", "--no-fusion"], "error: --no-fusion shapes the default pipeline, "
         "which -p replaces; leave form-fusion-groups out of -p"),
        (["-p", "decompose", "--max-registers", "3"], "error: --max-registers shapes the "
         "default pipeline, which -p replaces; write register-budget{max-registers=N} in -p"),
        (["-o", "OUT", "--print-op-generic"], "error: --print-op-generic applies to printed "
         "IR; this command prints none (add --print-ir-after=NAME, or drop -o OUT / --emit)"),
        (["--print-ir-after", "nope"], "error: --print-ir-after=nope: the pipeline has no "
         "pass 'nope' (it runs fold-empty,decompose,sink-transposes,unmerge-broadcasts,"
         "channels-last,cse,dce,fold-constants,fuse-attention,form-fusion-groups,group-each-op,register-budget,tile-and-promote)"),
        (["-p", "decompose", "--print-ir-before", "cse"], "error: --print-ir-before=cse: the "
         "pipeline has no pass 'cse' (it runs decompose)"),
    ],
    ids=["ptx-info", "register-source", "target-with-p", "no-fusion-with-p",
         "max-registers-with-p", "generic-without-ir", "print-after-unknown",
         "print-before-not-in-p"],
)
def test_flag_that_cannot_apply_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("ok.mlir").write_text(VALID)
    result = run_main(capsys, "ok.mlir", *args)
    assert_user_error(result, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.mlir"]


def test_default_pipeline_flags_shape_the_printed_ir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(SOFTMAX)
    fused = run_main(capsys, str(src), "--target", "orin")
    unfused = run_main(capsys, str(src), "--no-fusion")
    assert fused.out.count("fusion.group (") == 1
    assert unfused.out.count("fusion.group (") == 7  # one per op: 2 negs, 5 of the softmax
    bad = run_main(capsys, str(src), "--target", "xyz")
    assert_user_error(bad, "error: --target: unknown target 'xyz'; known targets: h200, h100, "
                      "a100, rtx4090, orin, auto")


def test_remarks_without_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(SOFTMAX)
    result = run_main(capsys, str(src), "--remarks")
    assert result.code == 0
    assert "remark: fused nn.reduce_max" in result.err
    assert "fusion.group" in result.out


def test_print_ir_after_all_in_the_compile_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(SOFTMAX)
    result = run_main(capsys, str(src), "-o", str(tmp_path / "out"), "--print-ir-after-all")
    assert result.code == 0
    headers = [line for line in result.err.splitlines() if line.startswith("// -----// IR")]
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert headers == [f"// -----// IR Dump After {p} //----- //" for p in plan["passes"]]


# --- option errors keep their message -----------------------------------------------------


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ('form-fusion-groups{target="xyz"}', "pass 'form-fusion-groups' option 'target': "
         "unknown target 'xyz'; known targets: h200, h100, a100, rtx4090, orin, auto"),
        ("cli-checked{min-count=-2}", "pass 'cli-checked' option 'min-count': min-count "
         "must be 0 or more, got -2"),
        ("form-fusion-groups{policy=sideways target=orin}", "pass 'form-fusion-groups' option "
         "'policy': unknown policy 'sideways'; expected one of greedy, vertical, none"),
        ("fold-double-neg{erase=0}", "pass 'fold-double-neg' has no option 'erase'; "
         "did you mean 'erase-dead'? (its options: erase-dead)"),
        ("fold-double-neg{erase-dead=3}", "pass 'fold-double-neg': option 'erase-dead' "
         "expects bool, got '3'"),
    ],
    ids=["builtin-post-init", "plugin-post-init", "culprit-among-two", "option-as-typed",
         "type-as-typed"],
)
def test_pass_option_errors_keep_their_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pipeline: str, message: str
) -> None:
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    result = run_main(capsys, str(src), "--load-pass-plugin", str(PLUGIN),
                      "--load-pass-plugin", str(EXAMPLE_PLUGIN), "-p", pipeline)
    assert_user_error(result, f"error: {message}")


# --- instrumentation ----------------------------------------------------------------------


def test_print_ir_before_and_after_one_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(SOFTMAX)
    result = run_main(capsys, str(src), "-o", str(tmp_path / "out"),
                      "--print-ir-before=form-fusion-groups", "--print-ir-after",
                      "form-fusion-groups,decompose")
    assert result.code == 0, result
    headers = [line for line in result.err.splitlines() if line.startswith("// -----// IR")]
    assert headers == ["// -----// IR Dump After decompose //----- //",
                       "// -----// IR Dump Before form-fusion-groups //----- //",
                       "// -----// IR Dump After form-fusion-groups //----- //"]
    before, after = result.err.split("IR Dump After form-fusion-groups")
    assert "fusion.group" not in before and "fusion.group" in after
    after_decompose = before.split("IR Dump Before")[0]
    assert "nn.softmax" not in after_decompose and "nn.reduce_max" in after_decompose


def test_mlir_timing_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = compile_out(capsys, tmp_path)
    result = run_main(capsys, str(tmp_path / "m.mlir"), "-o", str(out), "--mlir-timing")
    assert result.code == 0
    err = result.err
    assert "... Execution time report ..." in err
    rows = [line.split(")", 1)[1].strip() for line in err.splitlines() if "%)" in line]
    plan = json.loads((out / "plan.json").read_text())
    assert [r for r in rows if not r.startswith("(") and r != "Total"] == plan["passes"]
    assert rows[-1] == "Total"
    assert {"(parse and verify)", "(verifier)", "(code generation)", "(writing OUT)"} <= set(rows)


def test_emit_dot_has_shapes_on_edges(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(SOFTMAX)
    result = run_main(capsys, str(src), "--emit", "dot")
    assert result.code == 0, result
    assert result.out.startswith("digraph fusec {")
    edges = [line for line in result.out.splitlines() if "->" in line]
    assert edges and all('[label="' in e for e in edges)
    assert any('[label="4x8xf32"]' in e for e in edges)
    assert any('[label="4x1xf32"]' in e for e in edges)  # the row max feeding the sub
