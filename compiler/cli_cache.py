"""The program cache for the command line's compile job, `fusec MODEL -o OUT`.

A compile job whose result the per-user program cache holds
(`compiler/program_cache.py`, the cache of `fusec.compile`) writes OUT from
the entry instead of compiling: nothing is parsed, no pass runs, no kernel is
probed or built, and neither xDSL nor numba is imported. OUT holds the same
files a compile writes (the same bytes: plan.json is signed again with the
user's key, without the fields the cache adds), written whole or not at all
(`compiler/out_writer.py`). A job that misses compiles as always and then
keeps its result in the cache.

```
fusec MODEL.mlir -o OUT     # first time: compiles, keeps the program
fusec MODEL.mlir -o OUT2    # fusec: note: 'OUT2' written from the program cache (...)
```

The key (`cli_key`) covers what changes the files a compile job writes: the
program's text and the name it is given by (plan.json and report.md quote
it), every option of the command line that shapes the pipeline or its
output (`-p`, `--insert-before/-after`, `--no-fusion`, `--no-fold-constants`,
`--target`, `--check-precision`, `--max-registers`, `--shared-memory-limit`,
`--gemm`, `--conv`, `--conv-tf32`, `--attention`, `--no-library-epilogue`,
`--remarks-in-ir`), the passes installed packages declare with their
versions (when `-p` or an insert could name one), the facts of the target
profile (`auto`: the GPU present), the device kind, what the machine offers the library choices
(cuDNN's file, cuDNN's attention package, CuPy, `CUPY_TF32`) and, through `program_key`, the
toolchain's versions and fusec's own source.

Jobs that neither read nor fill the cache (`off_reason`): `--no-cache` and
`FUSEC_PROGRAM_CACHE=0`; those whose output is a measurement of this
machine or of code the key cannot see (`--autotune`, `--ptx-info`,
`--register-source`, `--save-kernels`, `--load-pass-plugin`); and those
that ask to watch the passes run (`--print-ir-*`, `--remarks`,
`--mlir-timing`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusec.analysis.diagnostics import escape_controls
from fusec.compiler.program_cache import (
    COPIED_FILES,
    FILES_FIELD,
    KEY_FIELD,
    EntryFiles,
    ProgramStore,
    program_key,
)
from fusec.compiler.source_file import source_text

if TYPE_CHECKING:
    from fusec.compiler.compile import CompiledArtifacts

# Flags whose job always compiles, and why (docs/running.md lists them).
_BYPASS_FLAGS: dict[str, str] = {
    "no_cache": "asked",
    "autotune": "timed on the GPU",
    "ptx_info": "measured",
    "register_source": "measured",
    "save_kernels": "compiled for this machine",
    "load_pass_plugin": "a plugin's code",
    "print_ir_after_all": "IR printed",
    "print_ir_before": "IR printed",
    "print_ir_after": "IR printed",
    "remarks": "remarks printed",
    "mlir_timing": "passes timed",
}


def off_reason(args: argparse.Namespace) -> str | None:
    """The flag for which this compile job neither reads nor fills the
    program cache, or the switch that turned it off; None when it uses it."""
    for dest in _BYPASS_FLAGS:
        if getattr(args, dest):
            return "--" + dest.replace("_", "-")
    if ProgramStore.user() is None:
        return "FUSEC_PROGRAM_CACHE"
    return None


def cli_key(args: argparse.Namespace, text: str, name: str) -> str:
    """The program-cache key of the compile job `args` for the model `text`
    read from `name`."""
    from fusec.analysis.cudnn_library import find_cudnn
    from fusec.analysis.targets import get_target

    options: dict[str, Any] = {
        "job": "fusec MODEL -o OUT",
        "source": name,
        "pipeline": args.passes,
        "insert_before": list(args.insert_before),
        "insert_after": list(args.insert_after),
        "fusion": not args.no_fusion,
        "fold_constants": not args.no_fold_constants,
        "target": args.target or "auto",
        "check_precision": args.check_precision,  # seeded: the same groups split each time
        "max_registers": args.max_registers,
        "shared_memory_limit": args.shared_memory_limit,
        "gemm": args.gemm or "auto",
        "conv": args.conv or "auto",
        "conv_tf32": args.conv_tf32,
        "attention": args.attention or "auto",
        "library_epilogue": not args.no_library_epilogue,
        "library_timing": not args.no_library_timing,
        "remarks_in_ir": args.remarks_in_ir,
        # What the library choices of `auto` see of this machine.
        "cudnn": find_cudnn(),
        "cudnn_frontend": _installed("cudnn"),
        "cupy": _installed("cupy"),
        "cupy_tf32": os.environ.get("CUPY_TF32", ""),
    }
    if args.passes is not None or args.insert_before or args.insert_after:
        options["pass_packages"] = _pass_packages()  # what `-p` and the inserts may name
    return program_key(text, options, get_target(args.target or "auto"), _device())


def _pass_packages() -> list[list[str]]:
    """The passes installed packages declare (`compiler/registry.py`), with
    their package's name and version: another version of a pass is another key."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group="fusec.passes"):
        dist = ep.dist
        found.append([ep.name, ep.value, dist.name if dist else "", dist.version if dist else ""])
    return sorted(found)


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ValueError, ImportError):
        return False


def _device() -> str:
    """Where kernels would run, decided as `runtime/device.select_device`
    decides it, without choosing (the compile job sets nothing up)."""
    from fusec.analysis.gpu_driver import gpu_probe

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0"):
        return "sim"
    return "gpu" if gpu_probe()[0] else "sim"


@dataclass
class CachedCompile:
    """A compile job's model and its place in the program cache (`store`
    None: the job does not use the cache)."""

    source: str
    name: str
    store: ProgramStore | None = None
    key: str = ""

    @staticmethod
    def open(args: argparse.Namespace, sources: dict[str, str]) -> CachedCompile:
        """The job `args`'s model, read once (into `sources`, for messages)
        when the cache is used; otherwise named by its path, read by the
        compile."""
        if off_reason(args) is not None:
            return CachedCompile(args.input, args.input)
        text, name = source_text(Path(args.input))  # `-`: stdin, named <stdin>
        sources[name] = text
        store = ProgramStore.user()
        assert store is not None
        return CachedCompile(text, name, store, cli_key(args, text, name))

    def compile_args(self) -> dict[str, Any]:
        """`compile_model`'s arguments for the model."""
        if self.store is None:
            return {"source": self.source}
        return {"source": self.source, "source_name": self.name}

    def write_hit(self, out_dir: str, quiet: bool) -> bool:
        """Write OUT from the cache; False (nothing written) on a miss."""
        if self.store is None:
            return False
        found = self.store.load_files(self.key)
        if found is None:
            return False
        write_from_entry(found, out_dir)
        if not quiet:
            print(escape_controls(f"fusec: note: '{out_dir}' written from the program cache "
                                  "(--no-cache compiles again)"), file=sys.stderr)
        return True

    def keep(self, artifacts: CompiledArtifacts) -> None:
        """Keep a compile's result for the next job with the same key."""
        if self.store is not None:
            self.store.store(self.key, artifacts)


def write_from_entry(found: EntryFiles, out_dir: str | Path) -> None:
    """Write OUT from a checked entry: its files, and its plan.json without
    the cache's fields, signed again (`compiler/out_writer.py`)."""
    from fusec.compiler.out_writer import write_out_folder
    from fusec.runtime.out_signature import SIGNATURE_FIELD

    plan = {k: v for k, v in found.plan.items()
            if k not in (KEY_FIELD, FILES_FIELD, SIGNATURE_FIELD)}

    def fill(staging: Path) -> None:
        for name in COPIED_FILES:
            (staging / name).write_bytes(found.files[name])

    write_out_folder(out_dir, plan, fill)
