"""Poisoned kernel cache entries: a fuzz mode for the kernel cache's reads.

`poison_kernels(seed, count)` generates one random program (`fuzz/generate.py`,
from `seed`) and compiles it under a register cap, so that register-budget
counts every kernel with ptxas and the build workers store each distinct
kernel (PTX, cubin, counts) in a kernel cache of its own
(`codegen/kernel_cache.py`). A second compile must read every entry back
without a warning and write the same kernels.py. Then, `count` times, it puts
the entries back, replaces one by a mutation of it and compiles again:

- always unusable: the file truncated, emptied or random bytes; a JSON list;
  another format, version or key (an entry of another kernel copied over
  it); a byte of the PTX or the cubin changed without its digest; a register
  count negative, fractional or a string. The compile must print one warning
  naming the entry, build the kernel again (the same kernels.py as the clean
  compile) and leave a sound entry behind;
- maybe usable: a register count changed to another count (counts carry no
  digest: a hand-edited count steers register-budget like a real one).

Every compile must succeed, and the program's outputs in the simulator must
match the reference interpreter. Without ptxas or NVVM nothing is counted or
stored: the result is `ok` with a detail saying so.

```python
from fusec.fuzz.poison_kernels import poison_kernels
result = poison_kernels(seed=3, count=6)
print(result.category, result.outcome.detail)
```
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.fuzz.check import Outcome, half_type, match_outputs, one_line, reference_outputs
from fusec.fuzz.generate import random_graph
from fusec.fuzz.poison import poison_rounds
from fusec.fuzz.run import Result

WARNING = "fusec: warning: ignoring kernel cache entry"
CAP = 128  # --max-registers: under a cap every kernel is counted (and so built and stored)


@dataclass(frozen=True)
class _Compiled:
    outcome: Outcome
    kernels: str = ""
    stderr: str = ""


def poison_kernels(seed: int, count: int) -> Result:
    """Compile the random program of `seed` with `count` poisoned kernel
    cache entries (module docstring); ok, or the first failure."""
    rng = np.random.default_rng([seed, 0x4B])
    text = random_graph(np.random.default_rng(seed)).text()
    with tempfile.TemporaryDirectory(prefix="fusec-poison-kernels-") as folder, \
            _cache_dir(Path(folder)):
        outcome = _poison(text, seed, rng, Path(folder) / "kernels", count)
    return Result(seed, outcome, mode="poison-kernels")


@contextlib.contextmanager
def _cache_dir(folder: Path) -> Iterator[None]:
    """The kernel cache under `folder` while the block runs."""
    old = os.environ.get("FUSEC_CACHE_DIR")
    os.environ["FUSEC_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("FUSEC_CACHE_DIR", None)
        else:
            os.environ["FUSEC_CACHE_DIR"] = old


def _poison(text: str, seed: int, rng: np.random.Generator, cache: Path, count: int) -> Outcome:
    """The checks of `poison_kernels` with the kernel cache `cache`."""
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function, random_inputs

    module = parse_module(make_context(), text, "fuzz.mlir")
    func = find_function(module)
    inputs = random_inputs(func, seed)
    with np.errstate(all="ignore"):
        references = reference_outputs(module, text, inputs)
    check = _Checker(text, func.sym_name.data, inputs, references)
    clean = check.run("fill")
    if clean.outcome.failed:
        return clean.outcome
    entries = {p: p.read_bytes() for p in sorted(cache.rglob("*.json"))}
    if not entries:
        return Outcome("ok", "poison-kernels", "no ptxas or NVVM: no kernel was stored")
    again = check.run("reread")
    if again.outcome.failed:
        return again.outcome
    if again.stderr.strip() or again.kernels != clean.kernels:
        return Outcome("error", "poison-reread", "a sound cache changed the compile: "
                       + (again.stderr.strip().splitlines() or ["another kernels.py"])[0])

    def one_round(i: int, path: Path) -> tuple[str, Outcome]:
        others = [d for p, d in entries.items() if p != path]
        what, data, usable = _mutate(rng, entries[path], others)
        path.write_bytes(data)
        run = check.run(f"poison-{i}")
        return what, run.outcome if run.outcome.failed else \
            _check_miss(run, clean.kernels, path, usable)

    return poison_rounds(entries, count, rng, one_round)


@dataclass(frozen=True)
class _Checker:
    """Compiles the program under the cap and compares its outputs."""

    text: str
    name: str
    inputs: list[np.ndarray]
    references: list[list[np.ndarray]]

    def run(self, stage: str) -> _Compiled:
        from fusec.codegen.build_pool import forget_builds
        from fusec.compiler.compile import compile_model
        from fusec.compiler.compile_pipeline import ScheduleOptions
        from fusec.runtime.executor import run_program

        forget_builds()  # each compile reads the cache on disk, not this process's memory
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                art = compile_model(self.text, target="h200",
                                    schedule=ScheduleOptions(max_registers=CAP))
        except FusecError as e:
            return _Compiled(Outcome("rejected", f"compile-{stage}", e.message.splitlines()[0]))
        except Exception as e:
            return _Compiled(Outcome("error", f"compile-{stage}", one_line(e)))
        try:
            with np.errstate(all="ignore"):
                got = run_program(art.program, self.name, [a.copy() for a in self.inputs],
                                  device="sim")
        except Exception as e:
            return _Compiled(Outcome("error", f"run-{stage}", one_line(e)))
        outcome = match_outputs(got, self.references, half_type(self.text), stage)
        return _Compiled(outcome, art.kernels_py, err.getvalue())


def _check_miss(run: _Compiled, kernels: str, path: Path, usable: bool) -> Outcome:
    """An unusable entry: one warning naming it, the same kernels.py as the
    clean compile, a sound entry left behind. A maybe-usable one: no warning."""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    warned = [line for line in lines if line.startswith(WARNING) and str(path) in line]
    if len(warned) != len(lines) or len(warned) > 1:
        return Outcome("error", "poison-warning", f"stderr: {' | '.join(lines)[:300]}")
    if usable:
        return Outcome("error", "poison-warning", "a sound entry was refused") if warned \
            else Outcome("ok")
    if not warned:
        return Outcome("error", "poison-warning", "an unusable entry was used without a warning")
    if run.kernels != kernels:
        return Outcome("error", "poison-rebuild", "kernels.py differs from the clean compile's")
    try:
        entry = json.loads(path.read_bytes())
    except ValueError:
        entry = None
    if not isinstance(entry, dict) or not entry.get("ptx"):
        return Outcome("error", "poison-store", "the entry was not replaced")
    return Outcome("ok")


Mutator = Callable[[np.random.Generator, bytes, list[bytes]], tuple[str, bytes, bool]]


def _mutate(rng: np.random.Generator, data: bytes,
            others: list[bytes]) -> tuple[str, bytes, bool]:
    """(what was done, the new bytes, whether the entry may still be usable)."""
    return _MUTATORS[int(rng.integers(len(_MUTATORS)))](rng, data, others)


def _edit(what: str, change: Callable[[np.random.Generator, dict[str, Any]], None],
          usable: bool = False) -> Mutator:
    def mutate(rng: np.random.Generator, data: bytes, others: list[bytes]) -> tuple[str, bytes,
                                                                                   bool]:
        entry = json.loads(data)
        change(rng, entry)
        return what, json.dumps(entry).encode(), usable
    return mutate


def _flip(field: str) -> Callable[[np.random.Generator, dict[str, Any]], None]:
    """One character of `field` (the PTX text, or the cubin's base64) changed."""
    def change(rng: np.random.Generator, entry: dict[str, Any]) -> None:
        text = entry[field] or entry["ptx"]
        key = field if entry[field] else "ptx"
        i = int(rng.integers(len(text)))
        entry[key] = text[:i] + ("A" if text[i] != "A" else "B") + text[i + 1:]
    return change


def _set(field: str, values: tuple[object, ...]) -> Callable[[np.random.Generator,
                                                              dict[str, Any]], None]:
    def change(rng: np.random.Generator, entry: dict[str, Any]) -> None:
        entry[field] = values[int(rng.integers(len(values)))]
    return change


def _truncated(rng: np.random.Generator, data: bytes, others: list[bytes]) -> tuple[str, bytes,
                                                                                   bool]:
    return "truncated", data[:int(rng.integers(len(data)))], False


def _random_bytes(rng: np.random.Generator, data: bytes,
                  others: list[bytes]) -> tuple[str, bytes, bool]:
    return "random bytes", rng.bytes(int(rng.integers(1, 400))), False


def _another_kernel(rng: np.random.Generator, data: bytes,
                    others: list[bytes]) -> tuple[str, bytes, bool]:
    if not others:
        return "emptied", b"", False
    return "another kernel's entry", others[int(rng.integers(len(others)))], False


_MUTATORS: list[Mutator] = [
    _truncated,
    _random_bytes,
    _another_kernel,
    lambda rng, data, others: ("a JSON list", b"[" + data + b"]", False),
    _edit("a character of the PTX changed", _flip("ptx")),
    _edit("a character of the cubin changed", _flip("cubin")),
    _edit("another format", _set("format", ("fusec-tuning", "", None))),
    _edit("another version", _set("version", (1, 2, 99, "3"))),
    _edit("another key", _set("key", ("0" * 64, "", 7))),
    _edit("registers not a count", _set("registers", (-1, 2.5, "32", [32]))),
    _edit("spill bytes not a count", _set("spill_bytes", (-8, 0.5, "0"))),
    _edit("registers another count", _set("registers", (16, 64, 255)), usable=True),
]
