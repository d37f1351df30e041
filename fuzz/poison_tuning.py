"""Poisoned tuning cache entries: a fuzz mode for `--autotune`'s cache reads.

`poison_tuning(seed, count)` generates one random program (`fuzz/generate.py`,
from `seed`), autotunes it with a fake timer (random times, so any offered
schedule may win) into a tuning cache of its own, and checks that a second
compile reads every entry back without a warning. Then, `count` times, it
puts the legal entries back, replaces one group's entry by a mutation of it
and compiles again:

- always illegal: a schedule field negative, 2^31 or 2^63, of the wrong
  type (string, float, bool, null, list) or an unknown string; an unknown
  field; a schedule of unknown name; times negative, NaN or a string; the
  JSON truncated, random bytes, a list instead of the object, the entry of
  another group (its own key); no candidates. The compile must print one
  warning naming the entry and time the group again, and rewrite the entry
  as JSON;
- maybe legal: a field 0 or another small value, a field removed (its
  default may apply), another group's result under this key, a split part
  added: used or refused, either is right.

Every compile must succeed without an exception, and the program's outputs
in the simulator must match the reference interpreter (`fuzz/check.compare`).
The result is a `fuzz.run.Result` (index = seed): `ok`, or the first failure
with the mutation in its detail.

```python
from fusec.fuzz.poison_tuning import poison_tuning
result = poison_tuning(seed=3, count=20)
print(result.category, result.outcome.detail)
```
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import KernelLaunch
from fusec.compiler.autotune import AutotuneOptions
from fusec.fuzz.check import Outcome, half_type, match_outputs, reference_outputs
from fusec.fuzz.generate import random_graph
from fusec.fuzz.poison import poison_rounds
from fusec.fuzz.run import Result

WARNING = "fusec: warning: ignoring the tuning cache entry"
DEVICE = "fuzz GPU"
TOP_K = 3  # candidates per group: enough to vary, few to compile


class RandomTimer:
    """Times drawn at random (a fake GPU): the kept schedule is any candidate."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        return float(self.rng.uniform(0.5, 2.0))


@dataclass(frozen=True)
class Mutation:
    """An entry's new bytes, what was done, and whether it can be legal."""

    data: bytes
    what: str
    maybe_legal: bool = False


Entries = dict[Path, bytes]
Mutator = Callable[[np.random.Generator, Path, Entries], Mutation | None]


def poison_tuning(seed: int, count: int, text: str | None = None) -> Result:
    """Autotune the random program of `seed` (or the program `text`) with
    `count` poisoned entries (module docstring); ok, or the first failure."""
    rng = np.random.default_rng([seed, 0x7C])
    text = text if text is not None else random_graph(np.random.default_rng(seed)).text()
    with tempfile.TemporaryDirectory(prefix="fusec-poison-") as folder:
        outcome = _poison(text, seed, rng, Path(folder), count)
    return Result(seed, outcome, mode="poison-tuning")


def _poison(text: str, seed: int, rng: np.random.Generator, cache: Path, count: int) -> Outcome:
    """The checks of `poison_tuning` in the tuning cache `cache`."""
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function, random_inputs

    module = parse_module(make_context(), text, "fuzz.mlir")
    func = find_function(module)
    inputs = random_inputs(func, seed)
    with np.errstate(all="ignore"):
        references = reference_outputs(module, text, inputs)
    name = func.sym_name.data
    first = _compile_and_check(text, name, inputs, references, rng, cache, "tune")
    if first.outcome.failed:
        return first.outcome
    legal = {p: p.read_bytes() for p in sorted(cache.rglob("*.json"))}
    again = _compile_and_check(text, name, inputs, references, rng, cache, "reread")
    if again.outcome.failed:
        return again.outcome
    if again.stderr or again.timed:
        return Outcome("error", "poison-reread", "a legal entry was not used: "
                       + (again.stderr.strip().splitlines() or ["timed again"])[0])

    def one_round(i: int, path: Path) -> tuple[str, Outcome]:
        mutation = _mutate(rng, path, legal)
        path.write_bytes(mutation.data)
        run = _compile_and_check(text, name, inputs, references, rng, cache, f"poison-{i}")
        return mutation.what, run.outcome if run.outcome.failed else \
            _check_miss(run, path, mutation)

    return poison_rounds(legal, count, rng, one_round)


@dataclass(frozen=True)
class _Run:
    outcome: Outcome
    stderr: str = ""
    timed: int = 0


def _compile_and_check(text: str, name: str, inputs: list[np.ndarray],
                       references: list[list[np.ndarray]], rng: np.random.Generator,
                       cache: Path, stage: str) -> _Run:
    """Autotune `text` (fake timer, tuning cache `cache`), run it in the
    simulator and compare with the references."""
    from fusec.compiler.compile import compile_model
    from fusec.runtime.executor import run_program

    options = AutotuneOptions(top_k=TOP_K, timer=RandomTimer(rng), device=DEVICE, quiet=True,
                              cache_dir=cache)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            art = compile_model(text, fusion=True, target="h200", autotune=options)
    except FusecError as e:
        return _Run(Outcome("rejected", f"compile-{stage}", e.message.splitlines()[0]))
    except Exception as e:
        return _Run(Outcome("error", f"compile-{stage}", _one_line(e)), err.getvalue())
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            got = run_program(art.program, name, [a.copy() for a in inputs], device="sim")
    except Exception as e:
        return _Run(Outcome("error", f"run-{stage}", _one_line(e)), err.getvalue())
    timed = art.tuning.timed if art.tuning is not None else 0
    return _Run(match_outputs(got, references, half_type(text), stage), err.getvalue(), timed)


def _check_miss(run: _Run, path: Path, mutation: Mutation) -> Outcome:
    """An illegal entry: one warning line naming it, the group timed again,
    the entry rewritten as JSON. A maybe-legal one: at most that warning."""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    warned = [line for line in lines if line.startswith(WARNING) and str(path) in line]
    if len(warned) != len(lines) or len(warned) > 1:
        return Outcome("error", "poison-warning", f"stderr: {' | '.join(lines)[:300]}")
    if mutation.maybe_legal and not warned:
        return Outcome("ok")
    if not warned:
        return Outcome("error", "poison-warning", "an illegal entry was used without a warning")
    if run.timed < 1:
        return Outcome("error", "poison-retime", "the group was not timed again")
    try:
        json.loads(path.read_bytes())
    except ValueError:
        return Outcome("error", "poison-store", "the entry was not replaced")
    return Outcome("ok")


def _mutate(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation:
    """A random mutation of `path`'s legal entry that applies to it."""
    order = rng.permutation(len(_MUTATORS))
    for i in order:
        mutation = _MUTATORS[int(i)](rng, path, legal)
        if mutation is not None:
            return mutation
    return _random_bytes(rng, path, legal)  # always applies


def _entry(path: Path, legal: Entries) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(legal[path])
    return entry


def _dump(entry: object) -> bytes:
    return json.dumps(entry).encode("utf-8")


def _schedule_fields(rng: np.random.Generator, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a random schedule of `entry` (fused or a split part),
    None when it has none (a layout copy)."""
    result = entry["result"]
    variants = [result["fused"], *result["parts"]]
    schedules = [c for v in variants for c in v["candidates"] if c is not None]
    if not schedules:
        return None
    fields: dict[str, Any] = schedules[int(rng.integers(len(schedules)))]["fields"]
    return fields


def _field_value(values: tuple[object, ...], maybe_legal: bool, ints_only: bool = False) -> Mutator:
    """A schedule field set to one of `values` (an integer field when `ints_only`)."""
    def mutate(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation | None:
        entry = _entry(path, legal)
        fields = _schedule_fields(rng, entry)
        keys = [k for k, v in (fields or {}).items() if isinstance(v, int) or not ints_only]
        if fields is None or not keys:
            return None
        key = keys[int(rng.integers(len(keys)))]
        value = values[int(rng.integers(len(values)))]
        fields[key] = value
        return Mutation(_dump(entry), f"{key} = {json.dumps(value)}", maybe_legal)
    return mutate


def _edit(what: str, change: Callable[[np.random.Generator, dict[str, Any]], object],
          maybe_legal: bool = False) -> Mutator:
    """The entry changed by `change` (which may return a whole new entry, or
    False when it does not apply)."""
    def mutate(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation | None:
        entry = _entry(path, legal)
        new = change(rng, entry)
        if new is False:
            return None
        return Mutation(_dump(entry if new is None else new), what, maybe_legal)
    return mutate


def _truncated(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation:
    data = legal[path]
    cut = int(rng.integers(len(data)))
    return Mutation(data[:cut], f"truncated to {cut} bytes")


def _random_bytes(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation:
    n = int(rng.integers(1, 200))
    return Mutation(rng.integers(0, 256, n, dtype=np.uint8).tobytes(), f"{n} random bytes")


def _other_group(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation | None:
    others = [p for p in legal if p != path]
    if not others:
        return None
    other = others[int(rng.integers(len(others)))]
    return Mutation(legal[other], f"the entry of {other.name}")


def _other_result(rng: np.random.Generator, path: Path, legal: Entries) -> Mutation | None:
    others = [p for p in legal if p != path]
    if not others:
        return None
    entry = _entry(path, legal)
    entry["result"] = _entry(others[int(rng.integers(len(others)))], legal)["result"]
    return Mutation(_dump(entry), "another group's result under this key", maybe_legal=True)


def _drop_field(rng: np.random.Generator, entry: dict[str, Any]) -> object:
    fields = _schedule_fields(rng, entry)
    if not fields:
        return False
    del fields[list(fields)[int(rng.integers(len(fields)))]]
    return None


def _add_part(rng: np.random.Generator, entry: dict[str, Any]) -> object:
    entry["result"]["parts"].append(entry["result"]["fused"])
    return None


def _set_time(value: object) -> Callable[[np.random.Generator, dict[str, Any]], object]:
    def change(rng: np.random.Generator, entry: dict[str, Any]) -> object:
        times = entry["result"]["fused"]["times_us"]
        times[int(rng.integers(len(times)))] = value
        return None
    return change


def _unknown_field(rng: np.random.Generator, entry: dict[str, Any]) -> object:
    fields = _schedule_fields(rng, entry)
    target = fields if fields is not None and rng.random() < 0.5 else entry["result"]
    target["extra"] = 1
    return None


def _rename_schedule(rng: np.random.Generator, entry: dict[str, Any]) -> object:
    schedules = [c for c in entry["result"]["fused"]["candidates"] if c is not None]
    if not schedules:
        return False
    schedules[0]["name"] = "fusion.unknown"
    return None


def _no_candidates(rng: np.random.Generator, entry: dict[str, Any]) -> object:
    entry["result"]["fused"].update(candidates=[], times_us=[], samples_us=[])
    return None


def _list_result(rng: np.random.Generator, entry: dict[str, Any]) -> object:
    entry["result"] = [entry["result"]]
    return None


_MUTATORS: list[Mutator] = [
    _field_value((-1, -32, 2**31, 2**63), maybe_legal=False, ints_only=True),
    _field_value(("4", 4.0, True, None, [4]), maybe_legal=False, ints_only=True),
    _field_value(("nonsense",), maybe_legal=False),
    _field_value((0, 1, 2, 3, 8, 64, 1024), maybe_legal=True, ints_only=True),
    _edit("a schedule field removed", _drop_field, maybe_legal=True),
    _edit("a split part added", _add_part, maybe_legal=True),
    _edit("an unknown field", _unknown_field),
    _edit("a schedule of unknown name", _rename_schedule),
    _edit("no candidates", _no_candidates),
    _edit("the result a JSON list", _list_result),
    _edit("the entry a JSON list", lambda rng, e: [e]),
    _edit("a time negative", _set_time(-1.0)),
    _edit("a time NaN", _set_time(float("nan"))),
    _edit("a time a string", _set_time("fast")),
    _truncated,
    _random_bytes,
    _other_group,
    _other_result,
]


def _one_line(err: BaseException) -> str:
    """`TypeError: message (file.py:123)`."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}{where}"
