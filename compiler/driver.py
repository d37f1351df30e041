"""The `fusec MODEL.mlir [-p PIPELINE]` job, as in xdsl-opt: parse, verify, run
passes (verifying after each) and print the IR (or, for `--emit dot`, the op
graph). Without `-p` the passes are the compile job's default pipeline, so the
IR printed is the IR `-o OUT` would compile."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.remarks import without_remarks
from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.instrument import Instrumentation
from fusec.compiler.outputs import write_text_atomically
from fusec.compiler.parsing import (
    SPLIT_MARKER,
    make_context,
    parse_module,
    read_source,
    split_input,
)
from fusec.compiler.pipeline import Insertion, PipelineRunner, parse_pipeline_spec
from fusec.compiler.registry import PassRegistry
from fusec.compiler.verify import verify_module


@dataclass
class OptOptions:
    """What the command line asked of a parse-passes-print run."""

    input: str
    pipeline: str | None  # None: the compile job's default pipeline for `defaults`
    output: str | None = None
    split_input_file: bool = False
    verify_diagnostics: bool = False
    print_op_generic: bool = False
    plugins: list[str] = field(default_factory=list[str])
    defaults: PipelineOptions = field(default_factory=PipelineOptions)
    insertions: Sequence[Insertion] = ()
    instrument: Instrumentation = field(default_factory=Instrumentation)
    render: Callable[[ModuleOp], str] | None = None  # None: the IR (`--emit dot`: the graph)


# How `Printer.print_bytes_literal` escapes each byte: `\\` for a backslash,
# `\XX` outside printable ASCII and for `"`, the character itself otherwise.
_BYTE_ESCAPES = [
    "\\\\" if b == 0x5C else f"\\{b:02X}" if b < 0x20 or b > 0x7E or b == 0x22 else chr(b)
    for b in range(256)
]


class _Printer(Printer):
    """xDSL's printer with the same string literals built in one join: its
    byte-by-byte loop made printing the remarks of a large model slow."""

    def print_bytes_literal(self, bytestring: bytes) -> None:
        self.print_string('"' + "".join(_BYTE_ESCAPES[b] for b in bytestring) + '"')


def module_to_text(module: ModuleOp, generic: bool = False, remarks: bool = False) -> str:
    """Print a module the way fusec writes it everywhere: without the
    `fusion.remarks` attribute unless `remarks` (`--remarks-in-ir`)."""
    buf = io.StringIO()
    if remarks:
        _Printer(stream=buf, print_generic_format=generic).print_op(module)
    else:
        with without_remarks(module):
            _Printer(stream=buf, print_generic_format=generic).print_op(module)
    return buf.getvalue().rstrip("\n") + "\n"


def make_registry(plugins: list[str]) -> PassRegistry:
    """Built-in passes, installed entry points, then `--load-pass-plugin` files."""
    registry = PassRegistry()
    registry.load_entry_points()
    for path in plugins:
        registry.load_plugin(path)
    return registry


def run_opt(opts: OptOptions, sources: dict[str, str]) -> None:
    """Run the job; raises `FusecError` on bad input (nothing is written then)."""
    registry = make_registry(opts.plugins)
    spec = opts.pipeline if opts.pipeline is not None else default_pipeline(registry,
                                                                             opts.defaults)
    passes = parse_pipeline_spec(registry, spec, opts.insertions) if spec else []
    opts.instrument.check_names(passes)
    text = read_source(opts.input)
    name = "<stdin>" if opts.input == "-" else opts.input
    sources[name] = text
    chunks = split_input(text) if opts.split_input_file else [text]
    outputs = [_process(chunk, name, passes, opts) for chunk in chunks]
    result = f"\n{SPLIT_MARKER}\n".join(o.rstrip("\n") for o in outputs) + "\n"
    if opts.output is None:
        sys.stdout.write(result)
    else:
        write_text_atomically(opts.output, result)


def _process(chunk: str, name: str, passes: list[ModulePass], opts: OptOptions) -> str:
    ctx = make_context()
    try:
        with opts.instrument.timer.timed("(parse and verify)"):
            module = parse_module(ctx, chunk, name)
            verify_module(module)
        PipelineRunner(ctx, passes, instrument=opts.instrument).run(module)
    except FusecError as err:
        if not opts.verify_diagnostics:
            raise
        return err.render({name: chunk})
    if opts.render is not None:
        return opts.render(module)
    return module_to_text(module, opts.print_op_generic, opts.instrument.remarks_in_ir)
