"""The call path on a real GPU (skipped without one): graph replay against
plain launches, torch/CuPy/NumPy in and out, kernels linked from the cache
in a new process, OUT/kernels from --save-kernels, a corrupt entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_function

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent
GPT2_SMALL = ROOT / "bench" / "models" / "launch_path" / "gpt2_block_small.mlir"
CHAIN = """func.func @f(%x: tensor<4096xf32>, %y: tensor<4096xf32>) -> tensor<4096xf32> {
  %0 = nn.mul %x, %y : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %1 = nn.exp %0 : tensor<4096xf32>
  %2 = nn.add %1, %x : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  func.return %2 : tensor<4096xf32>
}
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from fusec.codegen import build_pool

    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    # Kernels another test of this process built would come from memory and
    # never reach this folder.
    build_pool.forget_builds()
    return tmp_path / "cache"


def _reference(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    func = find_function(parse_module(make_context(), text, "m.mlir"), None)
    return run_function(func, inputs)


@pytest.mark.parametrize("gemm", ["auto", "fused"])
def test_graph_replay_matches_plain_launches_on_fresh_inputs(gemm: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    text = GPT2_SMALL.read_text()
    func = find_function(parse_module(make_context(), text, "m.mlir"), None)
    graphs = fusec.compile(text, device="gpu", gemm=gemm)
    plain = fusec.compile(text, device="gpu", gemm=gemm, graphs=False)
    for seed in (1, 2, 3):  # the first call captures; later ones replay new data
        host = random_inputs(func, seed=seed)
        expected = run_function(func, host)[0]
        ins = [torch.from_numpy(a).cuda() for a in host]
        got, base = graphs(*ins), plain(*ins)
        assert isinstance(got, torch.Tensor) and got.is_cuda
        np.testing.assert_allclose(got.cpu().numpy(), base.cpu().numpy(), rtol=1e-5, atol=1e-5)
        scale = float(np.abs(expected).max())
        assert float(np.abs(got.cpu().numpy() - expected).max()) <= 5e-4 * scale
    assert graphs.executor.graph is not None and plain.executor.graph is None


def test_cuda_tensor_that_requires_grad_runs_without_graphs() -> None:
    """Parameters reach compiled partitions as tensors that require grad; torch
    refuses their CUDA array interface, so fusec reads a detached view."""
    torch = pytest.importorskip("torch")
    import fusec

    model = fusec.compile(CHAIN, device="gpu", graphs=False)
    rng = np.random.default_rng(9)
    x, y = (rng.standard_normal(4096).astype(np.float32) for _ in range(2))
    tx, ty = (torch.from_numpy(a).cuda().requires_grad_() for a in (x, y))
    got = model(tx, ty)
    np.testing.assert_allclose(got.detach().cpu().numpy(), _reference(CHAIN, [x, y])[0],
                               rtol=1e-5, atol=1e-6)


def test_every_kind_in_and_out_with_graphs(capfd: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    from numba import cuda

    import fusec

    model = fusec.compile(CHAIN, device="gpu")
    rng = np.random.default_rng(5)
    for _ in range(3):
        x, y = (rng.standard_normal(4096).astype(np.float32) for _ in range(2))
        want = _reference(CHAIN, [x, y])[0]
        out_np = model(x, y)
        assert isinstance(out_np, np.ndarray)
        out_cpu = model(torch.from_numpy(x), torch.from_numpy(y))
        assert isinstance(out_cpu, torch.Tensor) and out_cpu.device.type == "cpu"
        out_cuda = model(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
        assert isinstance(out_cuda, torch.Tensor) and out_cuda.is_cuda
        out_cp = model(cupy.asarray(x), cupy.asarray(y))
        assert isinstance(out_cp, cupy.ndarray)
        out_nb = model(cuda.to_device(x), cuda.to_device(y))
        assert not isinstance(out_nb, np.ndarray)
        for out in (out_np, out_cpu.numpy(), out_cuda.cpu().numpy(), cupy.asnumpy(out_cp),
                    out_nb.copy_to_host()):
            # exp() of float32 differs from float64's by ~1 ulp: an absolute
            # floor for results near 0
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert model.executor.graph is not None
    # the first call launched one by one; every later one replayed a graph
    counts = model.call_counts()
    assert counts.one_by_one == 1 and counts.replays == 14 and counts.copying_replays >= 3
    fresh = fusec.compile(CHAIN, device="gpu")
    x_dev, y_dev = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    for _ in range(4):  # device arrays at the same addresses: nothing copied
        fresh(x_dev, y_dev)
    counts = fresh.call_counts()
    assert (counts.one_by_one, counts.replays, counts.copying_replays) == (1, 3, 0)
    assert "fusec: warning" not in capfd.readouterr().err  # kernels loaded, none JIT-compiled
    with pytest.raises(FusecError, match="expected dtype float32"):
        model(torch.zeros(4096, dtype=torch.float64, device="cuda"), torch.zeros(4096))


_CHILD = """
import json, sys, numpy as np, fusec
from fusec.runtime import kernel_loader
model = fusec.load_out(sys.argv[1], device="gpu") if sys.argv[2] == "out" else \\
    fusec.compile(open(sys.argv[1]).read(), device="gpu")
x = np.arange(4096, dtype=np.float32) / 4096
out = model(x, x)
print(json.dumps({"load": kernel_loader.LAST_LOAD, "sum": float(np.asarray(out).sum())}))
"""


def _strip_cubins(folder: Path) -> int:
    """Remove the cubin from every entry under `folder` (PTX only, as
    written where no ptxas is installed); returns how many were changed."""
    changed = 0
    for path in folder.rglob("*.json"):
        entry = json.loads(path.read_text())
        if entry.get("cubin"):
            entry["cubin"] = entry["cubin_sha256"] = None
            path.write_text(json.dumps(entry))
            changed += 1
    return changed


def _child(path: Path, how: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), how], capture_output=True,
                          text=True, check=True, env=os.environ)
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


def test_second_process_links_kept_kernels(tmp_path: Path) -> None:
    model = tmp_path / "m.mlir"
    model.write_text(CHAIN)
    first, second = _child(model, "compile"), _child(model, "compile")
    assert first["load"]["compiled"] >= 1 and first["load"]["jit"] == 0, first
    assert second["load"]["compiled"] == 0 and second["load"]["jit"] == 0, second
    assert second["load"]["kept"] == first["load"]["compiled"]
    assert second["load"]["linked"] == 0, second  # the cubin was loaded as it is
    assert "fusec: warning" not in first["stderr"] + second["stderr"]
    assert second["sum"] == pytest.approx(first["sum"], rel=1e-6)


def test_kept_ptx_is_linked_by_the_driver_and_its_cubin_kept(tmp_path: Path,
                                                              own_cache: Path) -> None:
    model = tmp_path / "m.mlir"
    model.write_text(CHAIN)
    first = _child(model, "compile")
    kernels = first["load"]["compiled"]
    assert _strip_cubins(own_cache) >= 1  # as if no ptxas had been at hand
    linked = _child(model, "compile")
    assert linked["load"]["kept"] == kernels and linked["load"]["linked"] == kernels, linked
    assert linked["load"]["jit"] == 0 and "fusec: warning" not in linked["stderr"], linked
    again = _child(model, "compile")  # the driver's cubin was stored beside the PTX
    assert again["load"]["kept"] == kernels and again["load"]["linked"] == 0, again
    assert again["sum"] == pytest.approx(first["sum"], rel=1e-6)


def test_load_out_links_saved_kernels_and_rebuilds_corrupt_ones(tmp_path: Path,
                                                                own_cache: Path) -> None:
    from fusec.compiler.cli import main as fusec_main

    (tmp_path / "m.mlir").write_text(CHAIN)
    assert fusec_main([str(tmp_path / "m.mlir"), "-o", str(tmp_path / "out"),
                       "--save-kernels", "--quiet"]) == 0
    import shutil

    shutil.rmtree(own_cache)  # only OUT/kernels holds the PTX now
    run = _child(tmp_path / "out", "out")
    assert run["load"]["kept"] >= 1 and run["load"]["compiled"] == 0, run
    assert run["load"]["jit"] == 0 and "fusec: warning" not in run["stderr"], run
    for entry in (tmp_path / "out" / "kernels").rglob("*.json"):
        entry.write_text("{broken")
    shutil.rmtree(own_cache, ignore_errors=True)  # where the run kept cubins it linked
    again = _child(tmp_path / "out", "out")
    # The signed plan lists OUT/kernels' files: the changed folder is not used.
    assert "ignoring the kept kernels in" in again["stderr"]
    assert again["load"]["compiled"] >= 1 and again["load"]["jit"] == 0, again
    assert again["sum"] == pytest.approx(run["sum"])


def test_fusec_run_no_graphs_flag(tmp_path: Path) -> None:
    (tmp_path / "m.mlir").write_text(CHAIN)
    proc = subprocess.run([sys.executable, "-m", "fusec.compiler.cli", "run",
                           str(tmp_path / "m.mlir"), "--check", "--no-graphs", "--quiet",
                           "--device", "gpu"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "check passed" in proc.stdout
