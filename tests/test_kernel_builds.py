"""Each distinct kernel is compiled once, ever, in workers that start clean
(codegen/build_pool.py, codegen/build_worker.py, codegen/kernel_unit.py).

Builds are counted through the pool's hook (`add_listener`, and
`$FUSEC_BUILD_LOG` for a `fusec` run in another process), never by time.
The builds are real: numba's `compile_ptx` for sm_90 through NVRTC, and
ptxas where it is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fusec.codegen import build_pool
from fusec.codegen.build_worker import linkable
from fusec.codegen.kernel_cache import KernelStore
from fusec.codegen.kernel_unit import UNIT_NAME, KernelUnit, units_of_source
from fusec.codegen.ptx import program_signatures

# Two functions of the same body: kernels f_g0_exp and g_g0_exp differ only
# in their names (and header comments).
TWINS = """\
func.func @f(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %a = nn.exp %x : tensor<64x32xf32>
  %b = nn.mul %a, %x : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  func.return %b : tensor<64x32xf32>
}
func.func @g(%y: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %a = nn.exp %y : tensor<64x32xf32>
  %b = nn.mul %a, %y : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  func.return %b : tensor<64x32xf32>
}
"""


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[tuple[str, str]]]:
    """(event, kernel) of every build and cache hit, with an empty cache and
    nothing built before in this process."""
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    build_pool.forget_builds()
    # no workers while the test compiles: `register-budget` would start the
    # builds of its guesses (`KernelProbe.speculate`), counted here too
    build_pool.stop_workers()
    seen: list[tuple[str, str]] = []
    remove = build_pool.add_listener(lambda event, _key, label: seen.append((event, label)))
    yield seen
    remove()
    build_pool.forget_builds()


def _program(text: str):  # type: ignore[no-untyped-def]
    from fusec.compiler.compile import compile_model

    return compile_model(text, pipeline="decompose,form-fusion-groups").program


def _compile_or_skip(program):  # type: ignore[no-untyped-def]
    from fusec.analysis.diagnostics import FusecError
    from fusec.runtime.kernel_build import compile_parallel

    try:
        return compile_parallel(program.kernels_source, program_signatures(program), (9, 0))
    except FusecError as err:
        if "NvvmSupportError" in err.message or "NVRTC" in err.message:
            pytest.skip(f"numba cannot compile PTX here: {err.message}")
        raise


def test_kernels_that_differ_only_in_their_names_are_one_unit() -> None:
    program = _program(TWINS)
    kernels = sorted(program_signatures(program))
    assert kernels == ["f_g0_exp", "g_g0_exp"], kernels
    units = units_of_source(program.kernels_source, kernels)
    assert units[kernels[0]] == units[kernels[1]]
    name = units[kernels[0]].name
    assert name.startswith("fusec_") and UNIT_NAME not in units[kernels[0]].source
    assert f"def {name}(" in units[kernels[0]].source
    assert kernels[0] not in units[kernels[0]].source  # the name and the comments are gone
    # a different body is another unit
    other = _program(TWINS.replace("nn.mul %a, %y", "nn.add %a, %y"))
    other_units = units_of_source(other.kernels_source, ["g_g0_exp"])
    assert other_units["g_g0_exp"] != units["g_g0_exp"]
    # and its kernel has another name on the device (profilers tell them apart)
    assert other_units["g_g0_exp"].name != name


def test_identical_kernels_are_built_once(builds: list[tuple[str, str]]) -> None:
    program = _program(TWINS)
    first = _compile_or_skip(program)
    assert sorted(first.code) == ["f_g0_exp", "g_g0_exp"]
    assert first.distinct == 1 and first.cached == 0
    assert [e for e, _ in builds] == ["built"], builds
    code = first.code["f_g0_exp"]
    assert code is first.code["g_g0_exp"] and linkable(code.ptx) and ".target sm_90" in code.ptx
    # again in this process (another partition, another model): nothing built
    again = _compile_or_skip(_program(TWINS))
    assert again.distinct == again.cached == 1 and [e for e, _ in builds] == ["built"]
    # a new process (its memory forgotten): from the kernel cache
    build_pool.forget_builds()
    later = _compile_or_skip(_program(TWINS))
    assert later.cached == 1 and [e for e, _ in builds] == ["built", "cached"]
    assert later.code["g_g0_exp"] == code


# A script whose main module must never run in a worker: imported under any
# other name (multiprocessing's "spawn" imports it as `__mp_main__`), it
# records that and fails.
_SCRIPT = """\
import json, sys
if __name__ != "__main__":
    open({record!r}, "a").write(__name__ + "\\n")
    raise SystemExit("the caller's main module was imported")
sys.modules["torch"] = None  # as if importing torch were impossible: no worker may need it
from fusec.codegen.ptx import program_signatures
from fusec.compiler.compile import compile_model
from fusec.runtime.kernel_build import compile_parallel
program = compile_model(open({model!r}).read(), pipeline="decompose,form-fusion-groups").program
builds = compile_parallel(program.kernels_source, program_signatures(program), (9, 0))
print(json.dumps({{n: c.ptx[:200] for n, c in builds.code.items()}}))
"""


def test_workers_never_import_the_callers_main_module(tmp_path: Path) -> None:
    record, model, script = tmp_path / "imported.txt", tmp_path / "m.mlir", tmp_path / "main.py"
    model.write_text(TWINS)
    script.write_text(_SCRIPT.format(record=str(record), model=str(model)))
    env = {**os.environ, "FUSEC_CACHE_DIR": str(tmp_path / "cache"), "FUSEC_BUILD_WORKERS": "2"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    if "NvvmSupportError" in proc.stderr:
        pytest.skip("numba cannot compile PTX here")
    assert proc.returncode == 0, proc.stderr
    assert not record.exists(), record.read_text()
    ptx = json.loads(proc.stdout.splitlines()[-1])
    assert sorted(ptx) == ["f_g0_exp", "g_g0_exp"] and all(".version" in p for p in ptx.values())


def test_a_spawn_pool_would_import_it(tmp_path: Path) -> None:
    """What the test above guards against, shown: a "spawn" pool imports a
    script's main module in its workers (why the workers are plain
    subprocesses instead)."""
    record, script = tmp_path / "imported.txt", tmp_path / "main.py"
    script.write_text(textwrap.dedent(f"""\
        import multiprocessing
        if __name__ != "__main__":
            open({str(record)!r}, "a").write(__name__ + "\\n")
        if __name__ == "__main__":
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                print(pool.apply(abs, (-1,)))
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert record.read_text().split() == ["__mp_main__"]


def _fusec(args: list[str], cache: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FUSEC_CACHE_DIR": str(cache), "FUSEC_BUILD_LOG": str(log)}
    return subprocess.run([sys.executable, "-m", "fusec.compiler.cli", *args],
                          capture_output=True, text=True, env=env, timeout=900, check=False)


def _events(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.slow
def test_a_filled_cache_makes_a_second_compile_probe_and_build_nothing(tmp_path: Path) -> None:
    (tmp_path / "m.mlir").write_text(TWINS)
    cache = tmp_path / "cache"
    # --max-registers: register-budget counts every kernel with ptxas
    args = [str(tmp_path / "m.mlir"), "--max-registers", "64", "--save-kernels", "--remarks"]
    first = _fusec([*args, "-o", str(tmp_path / "a")], cache, tmp_path / "log1")
    if "NvvmSupportError" in first.stderr or "ptxas is not installed" in first.stderr:
        pytest.skip("no PTX or no ptxas here")
    assert first.returncode == 0, first.stderr
    assert _events(tmp_path / "log1").count("built") == 1, (tmp_path / "log1").read_text()
    for line in (tmp_path / "log1").read_text().splitlines():  # EVENT KEY KERNEL ASKED DONE
        asked, done = map(float, line.split()[3:])
        assert 0 < asked <= done, line
    assert "ptxas counted 1 kernel (1 more from the cache)" in first.stderr, first.stderr
    second = _fusec([*args, "-o", str(tmp_path / "b")], cache, tmp_path / "log2")
    assert second.returncode == 0, second.stderr
    events = _events(tmp_path / "log2")
    assert "built" not in events and "cached" in events, events
    assert "ptxas counted 0 kernels (2 more from the cache)" in second.stderr, second.stderr
    kernels = [(tmp_path / d / "kernels.py").read_text() for d in ("a", "b")]
    assert kernels[0] == kernels[1]
    _check_numbers(tmp_path / "b")


def _check_numbers(out: Path) -> None:
    """OUT runs (in the simulator here) and matches the NumPy reference."""
    import fusec
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import run_module

    model = fusec.load_out(out, device="sim")
    x = np.random.default_rng(7).standard_normal((64, 32)).astype(np.float32)
    module = parse_module(make_context(), TWINS, "m.mlir")
    expected = run_module(module, [x], function="g")[0]
    np.testing.assert_allclose(model.function("g")(x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "not-utf8", "foreign", "wrong-ptx"])
def test_a_corrupted_entry_is_a_miss_never_a_crash_or_a_wrong_kernel(
        tmp_path: Path, damage: str) -> None:
    (tmp_path / "m.mlir").write_text(TWINS)
    cache = tmp_path / "cache"
    args = [str(tmp_path / "m.mlir"), "--save-kernels", "--quiet"]
    first = _fusec([*args, "-o", str(tmp_path / "a")], cache, tmp_path / "log1")
    if "NvvmSupportError" in first.stderr:
        pytest.skip("numba cannot compile PTX here")
    assert first.returncode == 0, first.stderr
    [entry] = list((cache / "kernels").rglob("*.json"))
    good = json.loads(entry.read_text())
    text = entry.read_text()
    if damage == "truncated":
        entry.write_text(text[: len(text) // 3])
    elif damage == "not-utf8":
        entry.write_bytes(b"\xff\xfe" + text.encode("utf-8")[2:])
    elif damage == "foreign":
        entry.write_text(json.dumps({**good, "key": "0" * 64}))
    else:  # other PTX under this key (its digest not updated): caught by the digest
        other = dict(good, ptx=good["ptx"].replace("ex2.approx", "sqrt.approx"))
        entry.write_text(json.dumps(other))
    second = _fusec([*args, "-o", str(tmp_path / "b")], cache, tmp_path / "log2")
    assert second.returncode == 0, second.stderr
    warnings = [line for line in second.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "ignoring kernel cache entry" in warnings[0], second.stderr
    assert "Traceback" not in second.stderr
    assert _events(tmp_path / "log2") == ["built"]  # compiled again, and the entry replaced
    assert json.loads(entry.read_text())["ptx"] == good["ptx"]
    saved = list((tmp_path / "b" / "kernels").rglob("*.json"))
    assert [json.loads(p.read_text())["ptx"] for p in saved] == [good["ptx"]]
    _check_numbers(tmp_path / "b")


def _split(name: str) -> str:
    """`x` split in two along its last axis, each slice scaled: one launch
    whose kernel calls a device function per slice (codegen/split_launch.py)."""
    return f"""
func.func @{name}(%x: tensor<8x12xf32>) -> (tensor<8x5xf32>, tensor<8x7xf32>) {{
  %a = nn.slice %x {{starts = [0, 0], limits = [8, 5]}} : (tensor<8x12xf32>) -> tensor<8x5xf32>
  %b = nn.slice %x {{starts = [0, 5], limits = [8, 12]}} : (tensor<8x12xf32>) -> tensor<8x7xf32>
  %c = nn.exp %a : tensor<8x5xf32>
  %d = nn.exp %b : tensor<8x7xf32>
  func.return %c, %d : tensor<8x5xf32>, tensor<8x7xf32>
}}"""


def test_a_split_launch_builds_with_its_segments(builds: list[tuple[str, str]]) -> None:
    """The kernel of a split calls a device function per segment, written
    before it in kernels.py: its unit holds them (a build of the kernel alone
    failed with a NameError), and two such kernels of the same shape are one
    unit."""
    from fusec.compiler.compile import compile_model

    program = compile_model(_split("f") + _split("g")).program
    kernels = sorted(program_signatures(program))
    assert kernels == ["f_g0_split", "g_g0_split"], kernels
    units = units_of_source(program.kernels_source, kernels)
    assert units["f_g0_split"] == units["g_g0_split"]
    assert f"def {units['f_g0_split'].name}_s0(" in units["f_g0_split"].source
    built = _compile_or_skip(program)
    assert sorted(built.code) == kernels and built.distinct == 1
    assert [event for event, _ in builds] == ["built"], builds


def test_report_names_each_kernel_by_its_device_symbol() -> None:
    """Profilers show a kernel by its unit's name: report.md says which
    kernels each name is, and equal kernels in two functions share it."""
    from fusec.compiler.compile import compile_model

    artifacts = compile_model(TWINS, pipeline="decompose,form-fusion-groups")
    units = units_of_source(artifacts.program.kernels_source, ["f_g0_exp", "g_g0_exp"])
    symbol = units["f_g0_exp"].name
    assert f"| `{symbol}` | `f_g0_exp` |" in artifacts.report_md
    assert f"| `{symbol}` | `g_g0_exp` |" in artifacts.report_md


def test_integer_literal_casts_are_bound_once_per_function() -> None:
    from fusec.codegen.kernel_unit import hoist_literal_casts

    text = ("@cuda.jit(device=True, inline=True)\n"
            "def k_s0(a):\n"
            "    return a[numba.uint64(3)] + a[uint32(3)]\n"
            "@cuda.jit\n"
            "def k(a, b):\n"
            "    x = numba.uint64(5) + uint64(5) * numba.uint64(17) + my_uint64(5)\n"
            "    b[0] = float32(2)")
    assert hoist_literal_casts(text).splitlines() == [
        "@cuda.jit(device=True, inline=True)",
        "def k_s0(a):",
        "    _u32_3 = numba.uint32(3)",
        "    _u64_3 = numba.uint64(3)",
        "    return a[_u64_3] + a[_u32_3]",
        "@cuda.jit",
        "def k(a, b):",
        "    _u64_17 = numba.uint64(17)",
        "    _u64_5 = numba.uint64(5)",
        "    x = _u64_5 + _u64_5 * _u64_17 + my_uint64(5)",
        "    b[0] = float32(2)"]


class _QueuedPool:
    """A pool whose requests wait until the test lets a worker begin one."""

    def __init__(self) -> None:
        self.replies: list[Future[dict[str, Any]]] = []

    def submit(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        reply: Future[dict[str, Any]] = Future()
        self.replies.append(reply)
        return reply


def test_a_build_a_worker_has_begun_is_not_cancelled_nor_built_twice(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The register probe cancels the builds it stops waiting for; one a
    worker was compiling went on, but the cancelled future made the runtime
    start the same kernel again beside it (`fusec --save-kernels` on a
    two-layer GPT-2: one GEMM kernel built twice, 2 s of a 4-core build)."""
    pool = _QueuedPool()
    monkeypatch.setattr(build_pool, "start_workers", lambda: pool)
    build_pool.forget_builds()
    store = KernelStore(tmp_path / "kernels")
    sig = [(1, "float32[::1]")]
    began = build_pool.kernel_code(KernelUnit("began"), sig, (9, 0), "began", store)
    waiting = build_pool.kernel_code(KernelUnit("waiting"), sig, (9, 0), "waiting", store)
    assert len(pool.replies) == 2
    assert pool.replies[0].set_running_or_notify_cancel()  # a worker begins the first
    assert not began.cancel() and not began.cancelled()
    assert waiting.cancel() and pool.replies[1].cancelled()  # never begun: both go
    # asked again: the build under way is shared, the cancelled one starts anew
    assert build_pool.kernel_code(KernelUnit("began"), sig, (9, 0), "began", store) is began
    again = build_pool.kernel_code(KernelUnit("waiting"), sig, (9, 0), "waiting", store)
    assert again is not waiting and len(pool.replies) == 3
    build_pool.forget_builds()
