"""How long each distinct kernel of an OUT takes to build, and what it built:
numba's front end (typing, lowering to LLVM IR), NVVM (LLVM IR -> PTX) and
ptxas (PTX -> cubin), each timed, one kernel at a time, on the CPU (no GPU
needed). The builds of a cold first call run in parallel in the build workers
(`codegen/build_pool.py`), so the longest single build is its critical path.

    fusec gpt2_12.mlir -o OUT --target h200
    python -m fusec.bench.build_times OUT               # every distinct kernel
    python -m fusec.bench.build_times OUT --only mm     # kernels whose name has "mm"

Each kernel is compiled as the build worker compiles it (its unit,
`codegen/kernel_unit.py`, through `cuda.compile_ptx` for the OUT's target,
then `ptxas -v`, with numba's lowering and typing patched as in a worker:
`codegen/numba_lowering.py`, `codegen/numba_typing.py`), in one child process
without the simulator, after a warm-up compile. Printed per kernel: the
seconds of each stage, the unit's source bytes, the PTX's `mma.sync` count,
its local-memory instructions (`ld.local`/`st.local`: anything numba or NVVM
left in local memory) and ptxas's registers and spill bytes. `--json FILE`
writes the rows with two more facts: the CPU seconds of the front end and NVVM
together (`cpu_s`, less disturbed than wall seconds by other processes on a
shared machine) and the SHA-256 of the cubin (`cubin_sha256`) built from the
PTX with numba's per-process numbering taken out of its names, so that a
change of the code generator meant to leave the machine code as it was can be
checked kernel by kernel.

    python -m fusec.bench.build_times OUT --json before.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.analysis.targets import ptxas_arch_of
from fusec.codegen.kernel_unit import units_of_source
from fusec.codegen.ptx import kernel_workdir, program_signatures, run_without_simulator
from fusec.runtime.compiled_model import read_out

_CHILD = r"""
import hashlib, json, re, subprocess, sys, tempfile, time, types
from pathlib import Path
from numba import cuda
from numba.cuda import types as nt
from numba.cuda.cudadrv import nvvm

work = Path(sys.argv[1])
job = json.loads((work / "job.json").read_text())
spent = {"nvvm": 0.0}
compile_ir = nvvm.compile_ir


def timed(*args, **kwargs):
    begin = time.perf_counter()
    try:
        return compile_ir(*args, **kwargs)
    finally:
        spent["nvvm"] += time.perf_counter() - begin


nvvm.compile_ir = timed

# what a build worker does to numba before it compiles (codegen/build_worker.py)
from fusec.codegen import numba_lowering, numba_typing

numba_lowering.install()
numba_typing.install()


def unnumbered(ptx):
    # numba's mangled names hold a per-process function number (`B3v46`) and
    # a tag of its compile flags, which the helpers a kernel calls change;
    # shared arrays are numbered per process (`_cudapy_smem_7`): with the
    # entry named `K` and the numbers counted from 0 in each PTX, the same
    # instructions give the same cubin whatever was compiled before
    entry = re.search(r"\.entry (\S+)\(", ptx)
    if entry:
        ptx = ptx.replace(entry.group(1)[3:], "K")
    names = {}
    ptx = re.sub(r"B(\d+)v(\d+)", lambda m: "B2v0" if int(m.group(1)) == len(m.group(2)) + 1
                 else m.group(0), ptx)
    return re.sub(r"_cudapy_smem_\d+",
                  lambda m: names.setdefault(m.group(0), f"_cudapy_smem_{len(names)}"), ptx)


@cuda.jit
def warm(a):
    a[0] = 1.0


cuda.compile_ptx(warm.py_func, (nt.float32[:],), cc=tuple(job["cc"]))
for unit in job["units"]:
    module = types.ModuleType("fusec_unit")
    exec(compile(unit["source"], "<fusec kernel>", "exec"), module.__dict__)
    sig = tuple(nt.Array(getattr(nt, t), n, "C") for n, t in unit["signature"])
    spent["nvvm"] = 0.0
    begin, cpu = time.perf_counter(), time.process_time()
    ptx, _ = cuda.compile_ptx(getattr(module, unit["name"]).py_func, sig, cc=tuple(job["cc"]))
    total, cpu = time.perf_counter() - begin, time.process_time() - cpu
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "k.ptx").write_text(unnumbered(ptx))
        begin = time.perf_counter()
        done = subprocess.run([job["ptxas"], "-arch=" + job["arch"], "-v", "-o",
                               str(Path(tmp) / "k.cubin"), str(Path(tmp) / "k.ptx")],
                              capture_output=True, text=True, check=False)
        ptxas = time.perf_counter() - begin
        cubin = (Path(tmp) / "k.cubin").read_bytes() if done.returncode == 0 else b""
    report = done.stdout + done.stderr
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    print(json.dumps({
        "label": unit["label"], "frontend_s": total - spent["nvvm"], "nvvm_s": spent["nvvm"],
        "ptxas_s": ptxas, "cpu_s": cpu, "source_bytes": len(unit["source"]),
        "mma": ptx.count("mma.sync"), "local": len(re.findall(r"\b(?:ld|st)\.local", ptx)),
        "ld_shared": len(re.findall(r"\bld\.shared", ptx)),
        "registers": int(regs.group(1)) if regs else None,
        "spill_bytes": int(spills.group(1)) + int(spills.group(2)) if spills else None,
        "cubin_sha256": hashlib.sha256(cubin).hexdigest() if cubin else None,
    }), flush=True)
"""


def distinct_units(program: Program, only: str = "") -> list[dict[str, object]]:
    """One job per distinct kernel unit of `program` whose name contains
    `only` (its first kernel's name labels it; `count` kernels share it)."""
    signatures = program_signatures(program)
    wanted = {n: s for n, s in signatures.items() if only in n}
    units = units_of_source(program.kernels_source, wanted)
    jobs: dict[str, dict[str, object]] = {}
    for name in sorted(wanted):
        unit = units[name]
        key = json.dumps([unit.source, wanted[name]])
        if key in jobs:
            jobs[key]["count"] = int(str(jobs[key]["count"])) + 1
            continue
        jobs[key] = {"label": name, "source": unit.source, "name": unit.name,
                     "signature": wanted[name], "count": 1}
    return list(jobs.values())


def measure(out: Path, only: str = "") -> list[dict[str, object]]:
    """The build times and PTX facts of each distinct kernel of `out`."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise FusecError("ptxas is not installed: no build to time")
    program, _, _ = read_out(out)
    units = distinct_units(program, only)
    cc = program.target.compute_capability
    job = {"units": units, "cc": list(cc), "arch": ptxas_arch_of(tuple(cc)), "ptxas": ptxas}
    with kernel_workdir("", {}, "fusec-build-times-", job=job) as work:
        text = run_without_simulator(_CHILD, work, "(build times)")
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    for row, unit in zip(rows, units, strict=True):
        row["count"] = unit["count"]
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="an OUT folder written by fusec")
    parser.add_argument("--only", default="", help="kernels whose name contains this")
    parser.add_argument("--json", type=Path, help="also write the rows here, with each "
                        "kernel's CPU seconds to PTX and its cubin's SHA-256")
    args = parser.parse_args(argv)
    try:
        rows = measure(args.out, args.only)
    except FusecError as err:
        print(err.render(), file=sys.stderr)
        return 1
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print("| kernel | kernels | front end s | NVVM s | ptxas s | source B | mma.sync | "
          "local ld/st | registers | spill B |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: -float(r["frontend_s"]) - float(r["nvvm_s"])
                    - float(r["ptxas_s"])):
        print(f"| {r['label']} | {r['count']} | {float(r['frontend_s']):.2f} | "
              f"{float(r['nvvm_s']):.2f} | {float(r['ptxas_s']):.2f} | {r['source_bytes']} | "
              f"{r['mma']} | {r['local']} | {r['registers']} | {r['spill_bytes']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
