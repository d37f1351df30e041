"""`codegen/numba_typing.py`: with numba's call typing memoised, fusec's
kernels compile to the very PTX they compile to without it, the memo
answers most call sites, and it is installed only over the method it was
written against."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fusec.codegen import numba_typing

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# In a process of its own: numba's real CUDA target (the tests run the simulator).
SCRIPT = textwrap.dedent("""
    import hashlib, json, sys, types
    from numba import cuda
    from numba.cuda import types as nt
    from numba.cuda.typing import context
    from fusec.codegen import numba_typing
    from fusec.codegen.kernel_unit import units_of_source
    from fusec.codegen.ptx import program_signatures
    from fusec.compiler.compile import compile_model

    counts = {"asked": 0}
    if sys.argv[1] == "memo":
        assert numba_typing.install(), "the pinned numba-cuda's method changed"
        memo = context.BaseContext.resolve_function_type

        def counted(self, func, args, kws):
            counts["asked"] += 1
            return memo(self, func, args, kws)

        context.BaseContext.resolve_function_type = counted
    digests = {}
    for path in sys.argv[2:]:
        program = compile_model(open(path).read(), target="h100").program
        signatures = program_signatures(program)
        for name, unit in units_of_source(program.kernels_source, signatures).items():
            module = types.ModuleType("fusec_unit")
            exec(compile(unit.source, "<unit>", "exec"), module.__dict__)
            sig = tuple(nt.Array(getattr(nt, t), n, "C") for n, t in signatures[name])
            ptx = cuda.compile_ptx(getattr(module, unit.name).py_func, sig, cc=(9, 0))[0]
            digests[name] = hashlib.sha256(ptx.encode()).hexdigest()
    typing = cuda.descriptor.cuda_target.typing_context
    stored = len(typing.__dict__.get("_fusec_call_types", {}))
    print(json.dumps({"ptx": digests, "asked": counts["asked"], "stored": stored}))
""")


def _compile_examples(how: str) -> dict[str, object]:
    """The PTX digests of the examples' kernels, compiled in a fresh process
    with numba's typing as it is ("plain") or memoised ("memo")."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    paths = [str(EXAMPLES / n) for n in ("add_layernorm_gelu.mlir", "softmax.mlir",
                                          "attention.mlir", "gpt2_block.mlir")]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, how, *paths], capture_output=True,
                          text=True, env=env, timeout=900, check=False)
    if "NvvmSupportError" in proc.stderr or "libNVVM" in proc.stderr:
        pytest.skip("no libNVVM here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_memoised_typing_compiles_the_same_ptx() -> None:
    plain, memo = _compile_examples("plain"), _compile_examples("memo")
    assert plain["ptx"] == memo["ptx"]
    assert len(memo["ptx"]) >= 4  # type: ignore[arg-type]
    # most call sites are repeats of a pair already typed
    assert 0 < 2 * memo["stored"] < memo["asked"], memo  # type: ignore[operator]


def test_calls_that_do_not_type_or_take_keywords_are_asked_every_time() -> None:
    asked: list[tuple[object, ...]] = []

    def resolve(self: object, func: object, args: object, kws: object) -> object:
        asked.append((func, args, kws))
        return None if func == "nope" else f"sig of {func}"

    class Context:
        pass

    memo = numba_typing.memoised(resolve)
    ctx = Context()
    assert memo(ctx, "mul", ["f32", "f32"], {}) == "sig of mul"
    assert memo(ctx, "mul", ["f32", "f32"], {}) == "sig of mul"
    assert memo(ctx, "nope", ["f32"], {}) is None
    assert memo(ctx, "nope", ["f32"], {}) is None
    assert memo(ctx, "kw", ["f32"], {"x": "f32"}) == "sig of kw"
    assert memo(ctx, "kw", ["f32"], {"x": "f32"}) == "sig of kw"
    assert memo(ctx, "list", [["unhashable"]], {}) == "sig of list"
    assert memo(ctx, "list", [["unhashable"]], {}) == "sig of list"
    assert [a[0] for a in asked] == ["mul", "nope", "nope", "kw", "kw", "list", "list"]


def test_the_memo_starts_again_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba_typing, "MEMO_LIMIT", 3)

    class Context:
        pass

    memo = numba_typing.memoised(lambda self, func, args, kws: f"sig of {func}")
    ctx = Context()
    for name in ("a", "b", "c", "d"):
        memo(ctx, name, [], {})
    assert list(ctx.__dict__[numba_typing._MEMO_ATTR]) == [("d", ())]
