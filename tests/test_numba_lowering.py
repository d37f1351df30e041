"""`codegen/numba_lowering.py`: the linear replacement of numba-cuda's
`Lower._find_singly_assigned_variable` finds the very variables the
original finds, on fusec's own kernels, and is installed only over the
method it was written against."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# In a process of its own: numba's real CUDA target (the tests run the simulator).
SCRIPT = textwrap.dedent("""
    import sys, types
    from numba import cuda
    from numba.cuda import lowering, types as nt
    from fusec.codegen import numba_lowering
    from fusec.codegen.kernel_unit import units_of_source
    from fusec.codegen.ptx import program_signatures
    from fusec.compiler.compile import compile_model

    original = lowering.Lower._find_singly_assigned_variable
    assert numba_lowering.install(), "the pinned numba-cuda's method changed"
    assert lowering.Lower._find_singly_assigned_variable is \
        numba_lowering._find_singly_assigned_variable
    checked = []

    def both(self):
        original(self)
        old = self._singly_assigned_vars
        numba_lowering._find_singly_assigned_variable(self)
        assert self._singly_assigned_vars == old, (len(old), len(self._singly_assigned_vars))
        checked.append(len(old))

    lowering.Lower._find_singly_assigned_variable = both
    for path in sys.argv[1:]:
        program = compile_model(open(path).read(), target="h100").program
        signatures = program_signatures(program)
        units = units_of_source(program.kernels_source, signatures)
        for name, unit in units.items():
            module = types.ModuleType("fusec_unit")
            exec(compile(unit.source, "<unit>", "exec"), module.__dict__)
            sig = tuple(nt.Array(getattr(nt, t), n, "C") for n, t in signatures[name])
            cuda.compile_ptx(getattr(module, unit.name).py_func, sig, cc=(9, 0))
    print("checked", len(checked), sum(checked))
""")


def test_the_linear_method_finds_what_the_original_finds() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    paths = [str(EXAMPLES / n) for n in ("add_layernorm_gelu.mlir", "softmax.mlir",
                                          "attention.mlir")]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *paths], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    if "NvvmSupportError" in proc.stderr or "libNVVM" in proc.stderr:
        pytest.skip("no libNVVM here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    functions, variables = map(int, proc.stdout.split()[1:3])
    assert functions >= 3 and variables > 100
