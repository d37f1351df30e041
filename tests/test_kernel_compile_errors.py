"""A generated kernel numba cannot compile is a bug in fusec: the CLI stops
with `fusec: internal error: kernel <name> (group <g>) does not compile:
<numba's first error line>`, exit 1, no traceback and no OUT, whether
register-budget's probe or `--ptx-info` (either register source) compiled it.
A machine without libNVVM (or the CUDA toolkit) only loses the probe's
register counts: a note, and the compile goes on; `--register-source ptxas`
there stays an error about the machine."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fusec.codegen import build_pool, build_worker, kernel_probe, ptx, writers
from fusec.codegen.kernel_source import KernelSource
from fusec.codegen.writers import Writer, WriteTask, Written
from fusec.compiler.cli import main

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")

PROGRAM = """\
func.func @f(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %a = nn.add %x, %y : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %r = nn.relu %a : tensor<64x32xf32>
  func.return %r : tensor<64x32xf32>
}
"""
# --max-registers: every kernel is counted by ptxas, whatever the time budget.
FLAGS = ["--max-registers", "64", "--target", "h200"]


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Build workers of this test's own (and no kernels kept from others)."""
    build_pool.stop_workers()
    build_pool.forget_builds()
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    yield
    build_pool.stop_workers()
    build_pool.forget_builds()


def _untypable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every emitted kernel gets a statement numba cannot type."""
    @dataclasses.dataclass(frozen=True)
    class Broken:
        writer: Writer

        @property
        def backend(self) -> str:
            return self.writer.backend

        @property
        def kind(self) -> str:
            return self.writer.kind

        def write(self, task: WriteTask) -> Written:
            kernel = self.writer.write(task)
            if not isinstance(kernel, KernelSource):
                return kernel  # a library call: no kernel to break
            lines = kernel.text.splitlines()
            at = next(i for i, line in enumerate(lines) if line.startswith("def "))
            lines.insert(at + 1, "    bad = (1, 2) + 1.5")
            return dataclasses.replace(kernel, text="\n".join(lines) + "\n")

    # every writer, as code generation and the register probe find them
    monkeypatch.setattr(writers, "_REGISTRY", {
        key: Broken(w) for key, w in writers.registered_writers().items()})


def test_a_kernel_that_does_not_compile_is_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        fresh_worker: None) -> None:
    _untypable(monkeypatch)
    src, out = tmp_path / "m.mlir", tmp_path / "OUT"
    src.write_text(PROGRAM)
    assert main([str(src), "-o", str(out), *FLAGS]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fusec: internal error: kernel f_g0_add (group g0) does not "
                          "compile: "), err
    assert "TypingError" in err and "Traceback" not in err and err[-1:] == "\n"
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".OUT")]


def test_without_libnvvm_the_counts_are_estimates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        fresh_worker: None) -> None:
    # the worker as on a machine without libNVVM: numba's own error
    worker = Path(build_worker.__file__).read_text().replace(
        "        module = types.ModuleType",
        "        from numba.cuda.cudadrv.error import NvvmSupportError\n"
        "        raise NvvmSupportError('libNVVM cannot be found.')\n"
        "        module = types.ModuleType")
    monkeypatch.setattr(build_pool, "worker_command", lambda: [sys.executable, "-c", worker])
    src, out = tmp_path / "m.mlir", tmp_path / "OUT"
    src.write_text(PROGRAM)
    assert main([str(src), "-o", str(out), "--remarks", *FLAGS]) == 0
    err = capsys.readouterr().err
    assert "note: register counts are estimates: numba could not compile the kernel to PTX " \
           "(NvvmSupportError: libNVVM cannot be found.)" in err
    assert "internal error" not in err
    assert (out / "kernels.py").exists()


@pytest.mark.parametrize(("error", "expected"), [
    ("TypingError: Failed in cuda mode pipeline (step: nopython frontend)\n"
     "\x1b[1mNo implementation of function add\x1b[0m\nDuring: typing of ...",
     "TypingError: No implementation of function add"),
    ("NameError: name 'x' is not defined", "NameError: name 'x' is not defined"),
    ("NvvmError: Failed to compile\n", "NvvmError: Failed to compile"),
])
def test_first_error_line(error: str, expected: str) -> None:
    assert kernel_probe.first_error_line(error) == expected


def _numba_cuda_errors() -> ModuleType:
    """numba's CUDA error classes (the simulator, on for the tests, has its
    own module of that name, without some)."""
    import numba.cuda

    path = Path(numba.cuda.__file__).parent / "cudadrv" / "error.py"
    spec = importlib.util.spec_from_file_location("numba_cuda_errors", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_environment_errors_are_told_from_kernel_errors() -> None:
    from numba.core.errors import LoweringError, TypingError

    e = _numba_cuda_errors()
    from fusec.codegen.compile_errors import environmental  # what the build worker asks
    for err in (e.NvvmSupportError("libNVVM cannot be found"), e.CudaSupportError("no toolkit"),
                e.NvrtcSupportError("no nvrtc"), e.CCSupportError("cc 9.0 unsupported"),
                OSError("libnvvm.so: cannot open shared object file"),
                e.NvvmError("libNVVM cannot be found. Do `conda install cudatoolkit`")):
        assert environmental(err), err
    for err in (TypingError("Unknown attribute"), LoweringError("bad"), NameError("x"),
                SyntaxError("bad"), e.NvvmError("Failed to compile\n<unnamed>: error: ...")):
        assert not environmental(err), err


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """register-budget counts nothing: only `--register-source ptxas` compiles."""
    monkeypatch.setattr(kernel_probe.KernelProbe, "count", lambda *_args, **_kw: None)


def test_ptx_info_on_a_kernel_that_does_not_compile_is_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        no_probe: None) -> None:
    _untypable(monkeypatch)
    src, out = tmp_path / "m.mlir", tmp_path / "OUT"
    src.write_text(PROGRAM)
    assert main([str(src), "-o", str(out), "--register-source", "ptxas"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fusec: internal error: kernel f_g0_add (group g0) does not "
                          "compile: TypingError: "), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_ptx_info_without_libnvvm_is_still_an_error_about_the_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        no_probe: None) -> None:
    driver = ptx._DRIVER.replace(  # pyright: ignore[reportPrivateUsage]
        "        ptx, _ = cuda.compile_ptx(",
        "        from numba.cuda.cudadrv.error import NvvmSupportError\n"
        "        raise NvvmSupportError('libNVVM cannot be found.')\n"
        "        ptx, _ = cuda.compile_ptx(")
    monkeypatch.setattr(ptx, "_DRIVER", driver)
    src, out = tmp_path / "m.mlir", tmp_path / "OUT"
    src.write_text(PROGRAM)
    assert main([str(src), "-o", str(out), "--register-source", "ptxas"]) == 1
    err = capsys.readouterr().err
    assert "error: numba could not compile the generated kernels to PTX" in err, err
    assert "NvvmSupportError: libNVVM cannot be found." in err
    assert "internal error" not in err


@pytest.mark.gpu
def test_gpu_register_source_on_a_kernel_that_does_not_compile_is_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        no_probe: None) -> None:
    _untypable(monkeypatch)
    src, out = tmp_path / "m.mlir", tmp_path / "OUT"
    src.write_text(PROGRAM)
    assert main([str(src), "-o", str(out), "--register-source", "gpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fusec: internal error: kernel f_g0_add (group g0) does not "
                          "compile: TypingError: "), err
    assert not out.exists()
