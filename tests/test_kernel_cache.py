"""The kernel cache on the CPU: keys, entries of real PTX (compiled by
`fusec MODEL -o OUT --save-kernels` with numba's compile_ptx through NVRTC)
and, where ptxas is installed, real cubins,
corrupt and foreign entries, concurrent writers, and the simulator's no-op."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fusec.codegen import build_pool
from fusec.codegen import kernel_cache as codegen_kernel_cache
from fusec.codegen.kernel_unit import KernelUnit, units_of_source
from fusec.compiler.cli import main as fusec_main
from fusec.runtime.device import gpu_available
from fusec.runtime.kernel_build import find_ptxas, linkable
from fusec.runtime.kernel_cache import KernelCode, KernelStore, kernel_key, user_store

SIG = [(1, "float32"), (1, "float32")]

MODEL = """func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = nn.exp %x : tensor<8xf32>
  %1 = nn.add %0, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %1 : tensor<8xf32>
}
"""


@pytest.fixture(scope="module")
def saved_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OUT directory written with --save-kernels (real PTX for sm_90)."""
    tmp = tmp_path_factory.mktemp("saved")
    (tmp / "m.mlir").write_text(MODEL)
    old = os.environ.get("FUSEC_CACHE_DIR")
    os.environ["FUSEC_CACHE_DIR"] = str(tmp / "user-cache")
    build_pool.forget_builds()  # built by no other test of this process
    try:
        assert fusec_main([str(tmp / "m.mlir"), "-o", str(tmp / "out"), "--save-kernels",
                           "--quiet"]) == 0
    finally:
        if old is None:
            os.environ.pop("FUSEC_CACHE_DIR")
        else:
            os.environ["FUSEC_CACHE_DIR"] = old
    return tmp


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json"))


def _one_entry(saved_out: Path) -> tuple[str, str, KernelCode]:
    path = _entries(saved_out / "out" / "kernels")[0]
    entry = json.loads(path.read_text())
    code = KernelStore(path.parent.parent).load(entry["key"], entry["kernel"])
    assert code is not None
    return entry["key"], entry["kernel"], code


def test_key_depends_on_source_kernel_types_cap_cc_and_versions(monkeypatch) -> None:
    src = KernelUnit("src")
    base = kernel_key(src, SIG, (9, 0))
    assert base == kernel_key(KernelUnit("src"), SIG, (9, 0))
    others = [kernel_key(KernelUnit("src2"), SIG, (9, 0)),
              kernel_key(KernelUnit("src", "k2"), SIG, (9, 0)),
              kernel_key(KernelUnit("src", max_registers=32), SIG, (9, 0)),
              kernel_key(src, [(2, "float32"), (1, "float32")], (9, 0)),
              kernel_key(src, [(1, "float64"), (1, "float32")], (9, 0)),
              kernel_key(src, SIG, (8, 0))]
    monkeypatch.setattr(codegen_kernel_cache, "toolchain_versions",
                        lambda: {"numba": "0.0", "numba-cuda": "0.0", "fusec": "0.0"})
    others.append(kernel_key(src, SIG, (9, 0)))
    assert len({base, *others}) == len(others) + 1


def test_save_kernels_writes_code_to_out_and_user_cache(saved_out: Path) -> None:
    out_entries = _entries(saved_out / "out" / "kernels")
    assert out_entries, "no kernel entry in OUT/kernels"
    cached = {p.name for p in _entries(saved_out / "user-cache" / "kernels")}
    assert {p.name for p in out_entries} <= cached
    key, name, code = _one_entry(saved_out)
    plan = json.loads((saved_out / "out" / "plan.json").read_text())
    assert name in {la["kernel"] for la in plan["functions"]["f"]["launches"]}
    assert ".target sm_90" in code.ptx and linkable(code.ptx)
    if find_ptxas() is not None:  # machine code for sm_90 beside the PTX
        assert code.cubin is not None and code.cubin.startswith(b"\x7fELF")
    kernels_py = (saved_out / "out" / "kernels.py").read_text()
    from fusec.analysis.targets import H200
    from fusec.codegen.ptx import program_signatures
    from fusec.runtime.compiled_model import read_out

    program, _, _ = read_out(saved_out / "out")
    sig = program_signatures(program)[name]
    unit = units_of_source(kernels_py, [name])[name]
    assert kernel_key(unit, sig, H200.compute_capability) == key  # what the runtime asks for
    assert KernelStore(saved_out / "out" / "kernels").load(key, name) == code


def test_store_then_load_round_trip(saved_out: Path, tmp_path: Path) -> None:
    key, name, code = _one_entry(saved_out)
    store = KernelStore(tmp_path)
    assert store.load(key, name) is None
    for kept in (KernelCode(code.ptx), KernelCode(code.ptx, b"\x7fELF\x00 machine code")):
        store.store(key, name, kept)
        assert store.load(key, name) == kept
    assert not list(tmp_path.rglob("*.tmp"))  # no temporary file left behind


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "cubin", "foreign",
                                    "format"])
def test_damaged_entry_is_ignored_with_a_warning_and_rebuilt(
        saved_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    key, name, code = _one_entry(saved_out)
    kept = KernelCode(code.ptx, b"\x7fELF\x00 machine code")
    store = KernelStore(tmp_path)
    store.store(key, name, kept)
    path = store.path(key)
    text = path.read_text()
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "flipped":
        entry = json.loads(text)
        entry["ptx"] = entry["ptx"].replace("ld.global", "st.global", 1)
        path.write_text(json.dumps(entry))
    elif damage == "cubin":
        entry = json.loads(text)
        entry["cubin"] = entry["cubin"][:-8] + "AAAAAAAA"
        path.write_text(json.dumps(entry))
    elif damage == "foreign":
        other = kernel_key(KernelUnit("another source"), SIG, (9, 0))
        store.store(other, name, kept)
        shutil.copy(store.path(other), path)
    else:
        path.write_text(json.dumps({"format": "something else"}))
    capsys.readouterr()
    assert store.load(key, name) is None
    err = capsys.readouterr().err
    assert "fusec: warning: ignoring kernel cache entry" in err and name in err
    store.store(key, name, kept)  # the rebuild replaces the entry
    assert store.load(key, name) == kept


_WRITER = textwrap.dedent("""
    import json, sys
    from fusec.runtime.kernel_cache import KernelCode, KernelStore
    root, ptx_file, tag = sys.argv[1:]
    ptx = KernelCode(open(ptx_file).read())
    store = KernelStore(root)
    for i in range(150):
        store.store("ab" * 32, "shared_kernel", ptx)            # the same key, both writers
        store.store(f"{tag}{i:04d}".ljust(64, "0"), "k", ptx)   # keys of its own
    print("done")
""")


def test_two_processes_fill_the_cache_at_once(saved_out: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, _, code = _one_entry(saved_out)
    ptx = KernelCode(code.ptx)
    ptx_file = tmp_path / "k.ptx"
    ptx_file.write_text(code.ptx)
    root = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(ptx_file), tag],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in ("a", "b")]
    store = KernelStore(root)
    reads = 0
    while any(p.poll() is None for p in procs):  # read while they write
        if store.load("ab" * 32, "shared_kernel") is not None:
            reads += 1
    outs = [p.communicate() for p in procs]
    assert [o for o, _ in outs] == ["done\n", "done\n"], outs
    assert all(not e for _, e in outs), outs
    assert "warning" not in capsys.readouterr().err  # never a partial entry
    assert store.load("ab" * 32, "shared_kernel") == ptx
    for tag in ("a", "b"):
        for i in (0, 75, 149):
            assert store.load(f"{tag}{i:04d}".ljust(64, "0"), "k") == ptx
    assert not list(root.rglob("*.tmp"))


def test_user_store_folder_and_switch(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    store = user_store()
    assert store is not None and store.root == tmp_path / "kernels"
    monkeypatch.setenv("FUSEC_KERNEL_CACHE", "0")
    assert user_store() is None
    monkeypatch.delenv("FUSEC_KERNEL_CACHE")
    monkeypatch.delenv("FUSEC_CACHE_DIR")
    default = user_store()
    assert default is not None and default.root.parts[-2:] == ("fusec", "kernels")


def test_unwritable_cache_is_reported_once(saved_out: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    key, name, ptx = _one_entry(saved_out)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = KernelStore(blocker)
    store.store(key, name, ptx)
    store.store(key, name, ptx)
    assert capsys.readouterr().err.count("cannot write the kernel cache") == 1
    with pytest.raises(OSError):
        store.store(key, name, ptx, strict=True)


@pytest.mark.skipif(gpu_available(), reason="numba.cuda runs on the GPU in this process")
def test_simulator_keeps_no_kernels(saved_out: Path, monkeypatch, tmp_path: Path) -> None:
    """The simulator compiles no machine code: running reads and writes no cache."""
    import fusec

    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    model = fusec.load_out(saved_out / "out", device="sim")
    x = np.random.default_rng(3).standard_normal(8).astype(np.float32) + 1
    np.testing.assert_allclose(model(x), np.exp(x) + x, rtol=1e-6)
    assert not list(tmp_path.rglob("*"))
