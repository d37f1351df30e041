"""Does a change leave fusec's output unchanged? Compiles every program of a
corpus with `fusec PROGRAM -o OUT --target h200` and records a digest of each
OUT's `kernels.py` and `plan.json`; a later run compares against the record
and names every program whose output changed. A change of structure (a module
moved, a planner split) must leave every digest as it was.

    python -m fusec.bench.check_identical save digests.json      # the baseline
    python -m fusec.bench.check_identical compare digests.json   # after the change
    python -m fusec.bench.check_identical compare digests.json --keep /tmp/outs

The corpus (`corpus()`): every `.mlir` of `bench/` and `examples/`; the test
corpus of whole programs (`tests/fuzz_regressions`, `tests/register_corpus`,
`tests/fixtures/feature_interactions`); and each `// -----` case of the pass
tests in `tests/filecheck/passes` (a case fusec rejects is recorded by its exit
status and message, so a change of diagnostics shows too). About 250 compiles,
a few minutes on two cores.

What would vary between two runs of the same compiler is left out or pinned:
- the register probe's budget is 0 s, so the estimate alone decides
  (`codegen/kernel_probe.py`; otherwise what ptxas counts in time decides);
- the kernel, tuning and key folders are fresh, empty temporary folders;
- plan.json's `out_hmac_sha256` (signed with the user's key) and `source`
  (an absolute path) are dropped before digesting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHOLE_PROGRAM_DIRS = ("bench", "examples", "tests/fuzz_regressions", "tests/register_corpus",
                      "tests/fixtures/feature_interactions")
SPLIT_CASE_DIRS = ("tests/filecheck/passes",)
SPLIT_MARKER = "// -----"
DROPPED_PLAN_KEYS = ("out_hmac_sha256", "source")
TARGET = "h200"

# Run in the child: the probe's budget pinned to 0 s, then fusec's own CLI.
_CHILD = (
    "import sys\n"
    "from fusec.codegen import kernel_probe\n"
    "kernel_probe.PROBE_BUDGET_S = 0.0\n"
    "from fusec.compiler.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@dataclass(frozen=True)
class Program:
    """One compile: its name in the record and the program's text."""

    name: str
    text: str


def corpus(root: Path = ROOT) -> list[Program]:
    """Every program the check compiles, in a fixed order."""
    programs: list[Program] = []
    for folder in WHOLE_PROGRAM_DIRS:
        for path in sorted((root / folder).rglob("*.mlir")):
            if "Output" in path.relative_to(root).parts:
                continue  # lit's scratch files
            programs.append(Program(str(path.relative_to(root)), path.read_text()))
    for folder in SPLIT_CASE_DIRS:
        for path in sorted((root / folder).glob("*.mlir")):
            programs.extend(_split_cases(path, root))
    return programs


def _split_cases(path: Path, root: Path) -> Iterator[Program]:
    """The `// -----` cases of one lit test that hold an `nn` function."""
    for index, case in enumerate(path.read_text().split(SPLIT_MARKER)):
        body = "\n".join(line for line in case.splitlines()
                         if not line.lstrip().startswith("//"))
        if "func.func" in body:
            yield Program(f"{path.relative_to(root)}#{index}", body)


def digest_out(out: Path) -> dict[str, str]:
    """The digests of one OUT folder's kernels.py and (normalised) plan.json."""
    plan = json.loads((out / "plan.json").read_text())
    for key in DROPPED_PLAN_KEYS:
        plan.pop(key, None)
    plan_text = json.dumps(plan, sort_keys=True, indent=1)
    return {"kernels.py": _sha256((out / "kernels.py").read_bytes()),
            "plan.json": _sha256(plan_text.encode())}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compile_one(program: Program, work: Path, env: dict[str, str]) -> dict[str, str]:
    """Compile `program` into a folder under `work`; its digests, or its exit
    status and message when fusec rejects it."""
    folder = work / _safe(program.name)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "program.mlir"
    source.write_text(program.text)
    out = folder / "out"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(source), "-o", str(out), "--target", TARGET],
        cwd=folder, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        # The message names the temporary file; keep what follows the path.
        message = done.stderr.replace(str(source), "PROGRAM").strip()
        return {"exit": str(done.returncode), "stderr": _sha256(message.encode())}
    return digest_out(out)


def _safe(name: str) -> str:
    return name.replace("/", "__").replace("#", "_case")


def compile_all(programs: Sequence[Program], work: Path, jobs: int) -> dict[str, dict[str, str]]:
    """The digests of every program, compiled `jobs` at a time."""
    env = dict(os.environ)
    env.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    for variable in ("FUSEC_CACHE_DIR", "FUSEC_CONFIG_DIR"):
        env[variable] = str(work / variable.lower())
    for variable in ("FUSEC_KERNEL_CACHE", "FUSEC_TUNING_CACHE"):
        env.pop(variable, None)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda p: compile_one(p, work, env), programs))
    return {p.name: r for p, r in zip(programs, results, strict=True)}


def compare(saved: dict[str, dict[str, str]], now: dict[str, dict[str, str]]) -> list[str]:
    """One line for each program whose record differs (or exists in one only)."""
    lines: list[str] = []
    for name in sorted(saved.keys() | now.keys()):
        before, after = saved.get(name), now.get(name)
        if before == after:
            continue
        if before is None or after is None:
            lines.append(f"{name}: {'new' if before is None else 'gone'}")
            continue
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        lines.append(f"{name}: {', '.join(changed)} changed")
    return lines


def main(argv: list[str] | None = None) -> int:
    """`save FILE` records the digests; `compare FILE` checks against them."""
    parser = argparse.ArgumentParser(prog="python -m fusec.bench.check_identical",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("save", "compare"))
    parser.add_argument("record", type=Path, help="the JSON file of digests")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="compiles at a time")
    parser.add_argument("--keep", type=Path, default=None,
                        help="compile into this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.mode == "compare" and not args.record.is_file():
        print(f"error: {args.record}: no such record (run `save` first)", file=sys.stderr)
        return 2
    programs = corpus()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        now = compile_all(programs, args.keep, args.jobs)
    else:
        with tempfile.TemporaryDirectory(prefix="fusec-identical-") as work:
            now = compile_all(programs, Path(work), args.jobs)
    failed = sum("exit" in r for r in now.values())
    if args.mode == "save":
        args.record.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} programs ({failed} rejected) recorded in {args.record}")
        return 0
    changes = compare(json.loads(args.record.read_text()), now)
    for line in changes:
        print(line)
    print(f"{len(now)} programs compared: "
          f"{'identical' if not changes else f'{len(changes)} changed'}")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
