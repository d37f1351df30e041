"""Target facts come from the target a compile asks for (analysis/targets.py):
compiling for a target with other facts changes what those facts decide."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from fusec.analysis.targets import A100, H200, ORIN, TARGETS
from fusec.codegen.generate import generate_program
from fusec.compiler.cli import main
from fusec.compiler.parsing import make_context, parse_module
from fusec.scheduling.grid_stride import BLOCKS_PER_SM

ROOT = Path(__file__).resolve().parent.parent


def _plan(out: Path) -> dict[str, object]:
    return json.loads((out / "plan.json").read_text())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (the CUDA toolkit)")
@pytest.mark.parametrize(("target", "arch"), [("h200", "sm_90"), ("a100", "sm_80"),
                                              ("orin", "sm_87")])
def test_ptx_info_assembles_for_the_compile_target(tmp_path: Path, target: str,
                                                   arch: str) -> None:
    out = tmp_path / "out"
    assert main([str(ROOT / "examples" / "softmax.mlir"), "-o", str(out), "--target", target,
                 "--register-source", "ptxas"]) == 0
    launches = _plan(out)["functions"]["softmax"]["launches"]  # type: ignore[index]
    assert launches and {la["register_source"] for la in launches} == {f"ptxas {arch}"}
    assert all(la["registers"] > 0 for la in launches)


# h200 with 1.5 KiB of static shared memory per block (dynamic as h200): what
# a kernel of static shared arrays may hold is the target's, not a constant.
SMALL_STATIC = dataclasses.replace(H200, name="small-static",
                                   description="h200 with 1.5 KiB of static shared memory",
                                   static_shared_memory_per_block=1536)

CONV = """
func.func @f(%x: tensor<1x16x10x9xf32>, %w: tensor<6x16x3x3xf32>) -> tensor<1x6x10x9xf32> {
  %y = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}
      : (tensor<1x16x10x9xf32>, tensor<6x16x3x3xf32>) -> tensor<1x6x10x9xf32>
  func.return %y : tensor<1x6x10x9xf32>
}
"""


@pytest.fixture
def small_static(monkeypatch: pytest.MonkeyPatch) -> str:
    """`--target small-static`, registered for this test."""
    monkeypatch.setitem(TARGETS, SMALL_STATIC.name, SMALL_STATIC)
    return SMALL_STATIC.name


def _compile_and_check(tmp_path: Path, text: str, target: str) -> Path:
    """OUT of `text` compiled for `target`, run in the simulator on fresh
    random inputs and compared with the reference interpreter."""
    model = tmp_path / f"{target}.mlir"
    model.write_text(text)
    out = tmp_path / target
    assert main([str(model), "-o", str(out), "--target", target]) == 0
    assert main(["run", str(out), "--check", "--device", "sim"]) == 0
    return out


def _static_bytes(out: Path) -> int:
    found = re.findall(r"static shared memory: (\d+) bytes", (out / "kernels.py").read_text())
    assert len(found) == 1, found
    return int(found[0])


def test_a_window_tile_shrinks_to_the_targets_static_shared_memory(
        tmp_path: Path, small_static: str) -> None:
    wide = _static_bytes(_compile_and_check(tmp_path, CONV, "h200"))
    small = _static_bytes(_compile_and_check(tmp_path, CONV, small_static))
    assert small <= SMALL_STATIC.static_shared_memory_per_block < wide


def test_attention_tiles_past_the_targets_static_limit_are_dynamic(
        tmp_path: Path, small_static: str) -> None:
    text = (ROOT / "tests" / "fixtures" / "feature_interactions" /
            "rope_attention_causal.mlir").read_text()
    static = _compile_and_check(tmp_path, text, "h200")
    dynamic = _compile_and_check(tmp_path, text, small_static)
    assert "cuda.shared.array(0, " not in (static / "kernels.py").read_text()
    assert "cuda.shared.array(0, " in (dynamic / "kernels.py").read_text()
    shared = [la["shared_bytes"] for la in _plan(dynamic)["functions"]["f"]["launches"]]  # type: ignore[index]
    assert max(shared) > SMALL_STATIC.static_shared_memory_per_block


# The values of target facts (analysis/targets.py): a static shared-memory
# limit, a block's threads, a grid's y/z extent, the register file, the
# registers of one thread, the shared memory and threads of the profiles.
FACT_VALUES = {48 * 1024: "static shared memory per block", 1024: "threads per block",
               65535: "blocks along grid y/z", 2**31 - 1: "blocks along grid x",
               65536: "registers per SM", 255: "registers per thread",
               227 * 1024: "shared memory per block", 163 * 1024: "shared memory per block",
               99 * 1024: "shared memory per block", 228 * 1024: "shared memory per SM",
               164 * 1024: "shared memory per SM", 2048: "threads per SM",
               132: "SMs of h200"}
LAYERS = ("analysis", "codegen", "compiler", "dialects", "importers", "passes", "reference",
          "runtime", "scheduling")
# The same numbers meaning something else, each named for what it is.
OTHER_MEANINGS: dict[tuple[str, object], str] = {
    ("runtime/user_key.py", 1024): "a key file's size bound",
    ("runtime/graph_cache.py", 1024): "a refill rate",
    ("runtime/plan_schema.py", 2**31 - 1): "MAX_DIM: 32-bit indexing",
    ("passes/fold_constants.py", 65536): "max_elements: a folding size bound",
    ("compiler/out_marker.py", 65536): "a marker file's size bound",
    ("importers/onnx/graph.py", 65536): "fold_max_elements",
    ("importers/onnx/context.py", 65536): "fold_max_elements",
    ("importers/torch/context.py", 65536): "fold_max_elements",
    ("importers/torch/translate.py", 65536): "fold_max_elements",
    ("analysis/remarks.py", 1024): "a KiB, in printed sizes",
    ("importers/torch/ops_structured.py", 1024): "CUMSUM_MOST: a constant triangle's size bound",
    ("scheduling/attention_mma_schedule.py", 2048): "PRODUCT_FLOPS: one mma's flops",
    ("codegen/wide_access.py", "sm_80"): "a comment in generated source: the hardware rounds",
}
_ARCH = re.compile(r"sm_\d{2}")


def _value(node: ast.expr) -> object:
    """The number a constant expression (`48 * 1024`, `2**31 - 1`) stands for."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)
        if type(left) is int and type(right) is int:
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, (ast.Pow, ast.LShift)) and 0 <= right < 64:
                return left**right if isinstance(node.op, ast.Pow) else left << right
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            ids.update(id(s.value) for s in body  # pyright: ignore[reportUnknownVariableType]
                       if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    return ids


def _facts_in(path: Path, rel: str) -> list[str]:
    """`rel:line: value (meaning)` for each target fact written as a literal
    in `path`'s code (not its comments or docstrings)."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found: list[str] = []
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            inner.update(id(n) for n in (node.left, node.right))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Constant, ast.BinOp)) or id(node) in inner:
            continue
        value = _value(node)
        arch = _ARCH.search(value) if isinstance(value, str) and id(node) not in docs else None
        if arch is not None and (rel, arch.group()) not in OTHER_MEANINGS:
            found.append(f"{rel}:{node.lineno}: {arch.group()!r} (a ptxas architecture)")
        elif type(value) is int and value in FACT_VALUES \
                and (rel, value) not in OTHER_MEANINGS:
            found.append(f"{rel}:{node.lineno}: {value} ({FACT_VALUES[value]})")
    return found


def test_target_facts_are_written_only_in_targets_py() -> None:
    files = [p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")]
    found = [f for p in files if p != ROOT / "analysis" / "targets.py"
             for f in _facts_in(p, str(p.relative_to(ROOT)))]
    assert not found, "read these from the compile's Target (analysis/targets.py):\n" + \
        "\n".join(found)


def test_the_warp_size_is_one_named_constant() -> None:
    """`WARP_SIZE` of analysis/targets.py, and no other name bound to 32 that
    says warp."""
    files = [p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")]
    others = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in files
              for node in ast.walk(ast.parse(p.read_text()))
              if isinstance(node, ast.Assign) and _value(node.value) == 32
              and any("WARP" in t.id.upper() for t in node.targets if isinstance(t, ast.Name))
              and p != ROOT / "analysis" / "targets.py"]
    assert not others, others


def test_the_scan_finds_a_fact_written_as_a_literal(tmp_path: Path) -> None:
    """The scan itself: code that spells the limits is found, comments and
    docstrings that name them are not."""
    probe = tmp_path / "probe.py"
    probe.write_text('"""Not sm_90, not 48 KiB."""\n# 1024 threads, 255 registers\n'
                     'LIMIT = 48 * 1024\nARCH = "-arch=sm_80"\nTHREADS = min(n, 1024)\n')
    found = _facts_in(probe, "probe.py")
    assert [f.split(":")[1] for f in found] == ["3", "4", "5"], found


def test_the_direct_window_kernel_caps_its_grid_by_the_targets_sms() -> None:
    """A grid-stride kernel launches at most `BLOCKS_PER_SM` blocks per SM of
    the target it is compiled for (it was capped by h200's 132 SMs on every
    target). 1.2 M outputs: more threads than either cap launches, so the
    loop strides; compiled only (too large for the simulator)."""
    text = """
func.func @f(%x: tensor<1x1x1100x1100xf32>, %w: tensor<1x1x3x3xf32>)
    -> tensor<1x1x1100x1100xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "window",
      schedule = #fusion.window<path = "direct", th = 1, tw = 1, oc_t = 1, ci_step = 1, pt = 1,
                                ot = 1>}
      : (tensor<1x1x1100x1100xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1100x1100xf32> {
  ^bb0(%a: tensor<1x1x1100x1100xf32>, %b: tensor<1x1x3x3xf32>):
    %c = nn.conv2d %a, %b {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1],
                           groups = 1}
        : (tensor<1x1x1100x1100xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1100x1100xf32>
    fusion.yield %c : tensor<1x1x1100x1100xf32>
  }
  func.return %y : tensor<1x1x1100x1100xf32>
}"""
    for target in (H200, A100, ORIN):
        program = generate_program(parse_module(make_context(), text, "t.mlir"), target)
        (launch,) = program.functions["f"].launches
        assert launch.grid == (target.sms * BLOCKS_PER_SM, 1, 1), target.name
