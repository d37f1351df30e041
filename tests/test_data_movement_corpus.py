"""The data-movement corpus (fuzz/data_movement.py) and its bench
(bench/data_movement.py) without a GPU: the generator is deterministic for a
seed and varied (every family and variant, f32 and bf16, odd and prime
extents, every permutation of a 4-D tensor), every full-size program moves
at least 64 MiB and compiles, every small program runs in the simulator like
the reference interpreter, and the bench lists and writes the corpus without
PyTorch. Timing needs a GPU and PyTorch:

    FUSEC_COMMIT=$(git rev-parse --short HEAD) python bench/data_movement.py
"""

from __future__ import annotations

import contextlib
import io
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from sweep import sampled

from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.python_api import compile as fusec_compile
from fusec.compiler.run_command import check_outputs
from fusec.fuzz.data_movement import (
    DEFAULT_COUNT,
    FAMILIES,
    MIN_TRAFFIC,
    MovementProgram,
    corpus,
    program,
    traffic_bytes,
)
from fusec.fuzz.graph import Arg, Graph, Node, TType
from fusec.fuzz.movement_extents import next_prime
from fusec.fuzz.movement_floor import floor_bytes
from fusec.reference.interpreter import find_function, random_inputs

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "data_movement.py"
sys.path.insert(0, str(BENCH.parent))
from data_movement import Result, select, summary, table  # noqa: E402  (bench/)

FULL = corpus()
SMALL = corpus(small=True)


@pytest.fixture(autouse=True)
def _estimates_only(no_ptxas_probe: None) -> None:
    """These tests check programs compile and compute, not register choices."""


def _ops(p: MovementProgram) -> list[tuple[str, str]]:
    """The program's ops and the attributes that do not depend on extents."""
    return [(n.op, n.attrs if n.op in ("nn.transpose", "nn.constant") else "")
            for n in p.graph.nodes]


def test_a_seed_gives_the_same_programs_and_another_seed_others() -> None:
    assert [p.text for p in corpus()] == [p.text for p in FULL]
    assert [p.text for p in corpus(small=True)] == [p.text for p in SMALL]
    other = corpus(seed=1)
    assert sum(a.text != b.text for a, b in zip(FULL, other, strict=True)) >= DEFAULT_COUNT - 2


def test_small_programs_are_the_full_ones_shrunk() -> None:
    for full, small in zip(FULL, SMALL, strict=True):
        assert (full.name, full.dtype, _ops(full)) == (small.name, small.dtype, _ops(small))
        assert small.traffic < 64 * 1024 < full.traffic


def test_the_default_corpus_has_every_family_variant_and_type() -> None:
    assert len(FULL) == DEFAULT_COUNT >= 48
    seen = {(p.family, p.variant) for p in FULL}
    assert seen == {(f, v) for f, variants in FAMILIES.items() for v in variants}
    assert {p.dtype for p in FULL} == {"f32", "bf16"}
    ops = {n.op for p in FULL for n in p.graph.nodes}
    assert {"nn.transpose", "nn.reshape", "nn.slice", "nn.conv2d", "nn.max_pool2d",
            "nn.avg_pool2d", "nn.gather", "nn.concat"} <= ops
    assert {"nn.mul", "nn.add"} <= ops and len(ops & {"nn.relu", "nn.silu", "nn.sigmoid",
                                                      "nn.tanh", "nn.gelu"}) >= 3
    permuted = [p for p in FULL if p.family == "permute"]
    assert {len(p.graph.args[0].type.shape) for p in permuted} == {2, 3, 4, 5}
    extents = {d for p in FULL for a in p.graph.args for d in a.type.shape}
    assert any(d > 100 and next_prime(d) == d for d in extents)  # a large prime
    assert any(d > 100 and d % 2 and next_prime(d) != d for d in extents)  # odd, not prime
    strided = [n.attrs for p in FULL for n in p.graph.nodes if n.op in ("nn.slice",
                                                                         "nn.conv2d")]
    assert any("strides = [2, 2]" in a or "strides = [1, 2]" in a for a in strided)
    assert any("dilations = [2, 2]" in a or "dilations = [3, 3]" in a for a in strided)


def test_every_permutation_of_a_4d_tensor_is_reachable() -> None:
    """Over seeds, the permute family's 4-D programs draw all 24
    permutations (the identity included)."""
    rank4 = FAMILIES["permute"].index("rank4")
    perms: set[str] = set()
    families = len(FAMILIES)
    for seed in range(400):
        # The permute family's index whose variant is rank4 for this seed.
        index = families * ((rank4 - seed) % len(FAMILIES["permute"]))
        p = program(seed, index, small=True)
        assert (p.family, p.variant) == ("permute", "rank4")
        (node,) = [n for n in p.graph.nodes if n.op == "nn.transpose"]
        perms.add(node.attrs)
    every = {"{perm = [" + ", ".join(map(str, q)) + "]}"
             for q in itertools.permutations(range(4))}
    assert perms == every


def test_full_size_programs_move_at_least_64_mib() -> None:
    assert MIN_TRAFFIC == 64 << 20
    for p in FULL:
        assert MIN_TRAFFIC <= p.traffic <= 8 * MIN_TRAFFIC, (p.name, p.traffic)


def test_traffic_counts_gathered_rows_not_the_whole_table() -> None:
    table, ids = TType((1000, 16), "bf16"), TType((3, 5), "i32")
    out = TType((3, 5, 16), "bf16")
    g = Graph("g", [Arg("t", table), Arg("i", ids)],
              [Node("y", "nn.gather", ("t", "i"), out, "{axis = 0}")], ["y"])
    assert traffic_bytes(g) == 15 * 16 * 2 + 15 * 4 + 15 * 16 * 2
    g2 = g.copy(nodes=[*g.nodes, Node("z", "nn.neg", ("t",), table, same_type=True)],
                outputs=["y", "z"])
    assert traffic_bytes(g2) == 2 * 1000 * 16 * 2 + 15 * 4 + 15 * 16 * 2


def test_traffic_counts_what_slices_cut_as_the_floor_does() -> None:
    """A strided slice reads a fraction of its input: the generator grows the
    program until that fraction, the floor the bench divides by, is 64 MiB
    (a program that moved 9 MiB once sat in a corpus said to move 64)."""
    x, out = TType((16, 48, 100, 11), "f32"), TType((8, 16, 50, 5), "f32")
    g = Graph("g", [Arg("x", x)], [Node(
        "y", "nn.slice", ("x",), out,
        "{starts = [1, 1, 1, 1], limits = [16, 48, 100, 11], strides = [2, 3, 2, 2]}")], ["y"])
    # 8 x 16 x 50 rows, each its span of 10 elements along the innermost axis
    assert traffic_bytes(g) == (8 * 16 * 50 * 10 + 8 * 16 * 50 * 5) * 4
    sliced = [p for p in FULL if p.variant in ("crop", "strided")]
    assert sliced
    for p in sliced:
        func = find_function(parse_module(make_context(), p.text, "p.mlir"), None)
        assert floor_bytes(func) == p.traffic >= MIN_TRAFFIC, p.name


# every 5th: 5 is prime to the 6 families, so each family keeps programs
@pytest.mark.parametrize("p", sampled(FULL, 5), ids=lambda p: p.name)
def test_full_size_program_compiles(p: MovementProgram) -> None:
    program_ = compile_model(p.text, fusion=True, target="h200").program
    assert program_.functions[p.name].launches


def _check_in_simulator(p: MovementProgram, seed: int = 1) -> None:
    """`fusec run --check` through the Python API: compile, run in the
    simulator on fresh random inputs, compare with the reference."""
    model = fusec_compile(p.text, target="h200", device="sim")
    func = find_function(parse_module(make_context(), p.text, f"{p.name}.mlir"), None)
    inputs = random_inputs(func, seed=seed)
    got = model(*inputs)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        ok = check_outputs(func, inputs, list(got) if isinstance(got, tuple) else [got])
    assert ok, f"{p.text}\n{printed.getvalue()}"


@pytest.mark.parametrize("p", sampled(SMALL, 3), ids=lambda p: p.name)
def test_small_program_matches_the_reference(p: MovementProgram) -> None:
    _check_in_simulator(p)


@pytest.mark.slow  # 3 x 48 programs in the simulator: about a minute
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_corpora_of_other_seeds_match_the_reference(seed: int) -> None:
    for p in corpus(seed, small=True):
        _check_in_simulator(p, seed)


# --- the bench's arguments, without PyTorch -------------------------------------------


def _bench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """bench/data_movement.py ARGS in a process where `import torch` fails."""
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = ['data_movement.py', *{list(args)!r}]; "
            f"runpy.run_path({str(BENCH)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_list_names_every_program_without_torch() -> None:
    proc = _bench("--list", "--seed", "2", "--count", "13")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    want = corpus(2, 13)
    assert [line.split()[0] for line in lines] == [p.name for p in want]
    assert all(p.shapes() in line and f"{p.family}/{p.variant}" in line
               for p, line in zip(want, lines, strict=True))
    small = _bench("--list", "--small", "--only", "3-4,dm07_view_chain_window_partition_f32")
    assert [line.split()[0] for line in small.stdout.splitlines()] == [
        SMALL[i].name for i in (3, 4, 7)]
    assert "KiB" in small.stdout


def test_write_gives_programs_fusec_runs(tmp_path: Path) -> None:
    proc = _bench("--write", str(tmp_path), "--small", "--count", "7")
    assert proc.returncode == 0, proc.stderr
    files = sorted(tmp_path.glob("*.mlir"))
    assert [f.stem for f in files] == sorted(p.name for p in SMALL[:7])
    assert all(f.read_text() == p.text for f, p in zip(
        files, sorted(SMALL[:7], key=lambda p: p.name), strict=True))
    reproduce = subprocess.run([sys.executable, "-m", "fusec", "run", str(files[0]),
                                "--check", "--quiet"], capture_output=True, text=True,
                               timeout=300)
    assert reproduce.returncode == 0 and "check passed" in reproduce.stdout, reproduce.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--only", "48"], "--only: '48' is not within the corpus's indexes 0-47"),
    (["--only", "dm99_nothing"], "--only: no program 'dm99_nothing' in the corpus"),
    (["--count", "0"], "argument --count: must be a positive integer, not 0"),
    (["--seed", "x"], "argument --seed: invalid integer: 'x'"),
    ([], "error: timing needs PyTorch with CUDA"),
])
def test_bad_arguments_and_no_torch_are_errors(args: list[str], message: str) -> None:
    proc = _bench(*args, "--count", "48") if "--count" not in args else _bench(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_select_keeps_corpus_order() -> None:
    assert [p.name for p in select(FULL, f"5,0-1,{FULL[3].name}")] == [
        FULL[i].name for i in (0, 1, 3, 5)]


def test_table_and_summary_lines() -> None:
    """The summary counts programs under half the floor and under 1.0x
    torch.compile, from the per-program times (the GPU side's arithmetic)."""
    results = [Result(FULL[0], moved=96 << 20, floor_ms=1.0, fusec_ms=1.25, eager_ms=3.0,
                      compile_ms=1.5, kernels=1, status="ok"),
               Result(FULL[1], moved=80 << 20, floor_ms=1.0, fusec_ms=2.5, eager_ms=3.0,
                      compile_ms=2.0, kernels=2, status="ok"),
               Result(FULL[2], moved=70 << 20, floor_ms=0.5, fusec_ms=0.5, eager_ms=1.0,
                      compile_ms=0.6, kernels=1, status="ok"),
               Result(FULL[3], status="FAILED: RuntimeError: boom")]
    lines = table(results)
    assert lines[2] == (f"| {FULL[0].name} | 96.0 | 1.250 | 80% | 1 | 3.000 | 1.500 | 1.20x "
                        "| ok |")
    text = "\n".join(summary(results))
    assert "Programs: 4 (3 timed, 1 failed or mismatched)." in text
    assert f"median 80%, minimum 40% ({FULL[1].name})" in text
    assert f"Below 50% of the floor: 1 of 3 ({FULL[1].name})." in text
    assert f"Below 1.0x torch.compile: 1 of 3 ({FULL[1].name}); median 1.20x." in text
    assert f"| {FULL[3].name} | 0.0 |  |  |  |  |  |  | FAILED: RuntimeError: boom |" in lines
