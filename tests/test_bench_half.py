"""bench/run_gpu.py --dtype f16|bf16 without a GPU: the option parses, and
every half row's model, rewritten to the half type, compiles (fusion on and
off). Timing needs a CUDA GPU and torch; run there:

    python bench/run_gpu.py --dtype f16 && python bench/run_gpu.py --dtype bf16
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fusec.compiler.compile import compile_model

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
from half_precision import HALF_ROWS, retype, row_name, tolerance  # noqa: E402


@pytest.fixture(autouse=True)
def _estimates_only(no_ptxas_probe: None) -> None:
    """These tests check that half models compile, not register decisions
    (ptxas would add about a minute over the models)."""


def test_help_names_the_dtype_option() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "run_gpu.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--dtype {f32,f16,bf16}" in out


def test_half_rows_refuse_an_unknown_row() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "run_gpu.py"), "--dtype", "f16",
                           "--rows", "no_such_row"], capture_output=True, text=True)
    assert proc.returncode == 2 and "for --dtype f16" in proc.stderr
    assert "scale_shift_residual" in proc.stderr  # programs run retyped too


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("program", ["scale_shift_residual", "bcast_two_outputs"])
def test_half_programs_compile_with_wide_accesses(program: str, dtype: str) -> None:
    """`--dtype f16 --rows scale_shift_residual,...` compiles the program
    retyped; its pointwise kernel moves 4 halves per access."""
    source = retype((BENCH / "programs" / f"{program}.mlir").read_text(encoding="utf-8"), dtype)
    art = compile_model(source, fusion=True, target="h200")
    assert "ld_wide64(in0, k0)" in art.kernels_py and "st_wide64(out0, k" in art.kernels_py


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.slow  # ptxas / a large compile: the slow set (README)
def test_half_chain16_ptx_moves_8_bytes_per_access(dtype: str) -> None:
    """chain16 in half: its one kernel loads and stores 4 halves per access
    (`ld.global.u64`), with 2-byte accesses only on the unaligned fallback."""
    from fusec.codegen.ptx import compile_program_ptx

    source = retype((BENCH / "models" / "chain16.mlir").read_text(encoding="utf-8"), dtype)
    art = compile_model(source, fusion=True, target="h200")
    (kernel,) = compile_program_ptx(art.program).values()
    ptx = str(kernel["ptx"])
    assert "ld.global.u64" in ptx and "st.global.u64" in ptx
    if dtype == "bf16":  # rounding to bf16 is branch-free: as many branches as in f16
        f16 = compile_model(retype(source.replace("bf16>", "f32>"), "f16"), target="h200")
        (other,) = compile_program_ptx(f16.program).values()
        assert ptx.count("bra") == str(other["ptx"]).count("bra")


def test_retype_rewrites_every_f32_tensor_type() -> None:
    text = ("%c = nn.constant dense<0.5> : tensor<f32>\n"
            "%y = nn.add %a, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>\n"
            "%m = nn.cmp %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>\n")
    out = retype(text, "bf16")
    assert "f32" not in out and out.count("xbf16>") == 4 and "tensor<bf16>" in out
    assert "tensor<2x3xi1>" in out and retype(text, "f32") == text
    assert row_name("mlp", "f16") == "mlp_f16" and row_name("mlp", "f32") == "mlp"
    assert tolerance("bf16", 2e-3) == 4e-2 and tolerance("f32", 2e-3) == 2e-3


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("row", HALF_ROWS)
def test_half_models_compile(row: str, dtype: str) -> None:
    source = retype((BENCH / "models" / f"{row}.mlir").read_text(encoding="utf-8"), dtype)
    for fusion in (True, False):
        art = compile_model(source, fusion=fusion, target="h200")
        if dtype == "bf16":
            assert "f32_to_bf16(" in art.kernels_py
        assert all(spec.dtype == ("uint16" if dtype == "bf16" else "float16")
                   for fp in art.program.functions.values()
                   for spec in (fp.values[v] for v in fp.inputs))
