"""The compile job's default pass pipeline, as a spec the user can see and change.

```
fold-empty,decompose,sink-transposes,unmerge-broadcasts,channels-last{target="auto"},cse,dce,fold-constants,fuse-attention{target="auto"},form-fusion-groups{target="auto"},group-each-op,register-budget,tile-and-promote
```

- `sink-transposes` moves a transpose of an elementwise result onto that op's
  operands, so a pointwise group reads them transposed instead of a copy
  transposing its result, and likewise the reshapes of an interleave
  (`--no-fusion` drops it, keeping one kernel per op).
- `unmerge-broadcasts` lets the readers of a reshape that merges a broadcast
  axis (grouped-query attention's `repeat_kv`) broadcast instead, so no kernel
  copies the repeated heads, and matmuls read batch axes that PyTorch's `bmm`
  form merged unmerged, so its attention fuses (`--no-fusion` drops it too).
- `channels-last` writes the convolutions cuDNN will compute in NHWC and
  moves the transposes that keeps the program's meaning to the graph's
  edges (`--conv`, `--conv-tf32` and `--target` as `tile-and-promote`'s;
  without fusion it only writes channels-last convolutions back to NCHW).
- `cse` and `dce` (xDSL's own passes) run before fusion so that an op written
  twice is computed once and an op nobody reads gets no kernel; a dead reader
  no longer forces its live producer to write its result out, which used to
  stop that producer fusing with its live neighbours.
- `fold-constants` follows them (`--no-fold-constants` drops it);
  `form-fusion-groups` carries the job's `--target` (`--no-fusion` drops it),
  `check-precision` follows it with `--check-precision`;
- `register-budget` and `tile-and-promote` carry `--max-registers`,
  `--shared-memory-limit` and `--gemm`.

`fusec MODEL -o OUT` runs this spec (or the one given with `-p`) and writes it
to plan.json (`pipeline`) and report.md, so `fusec MODEL -p '<that spec>'`
replays it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fusec.compiler.registry import PassRegistry

FUSION_PASS = "form-fusion-groups"
ATTENTION_PASS = "fuse-attention"
FOLD_PASS = "fold-constants"
CHECK_PRECISION_PASS = "check-precision"
# Before fusion: identical pure ops computed once, then what nothing reads dropped
# (cse leaves the producers of the duplicates it erased, dce takes them).
CLEANUP_PASSES = ("cse", "dce")
# Before cse, which merges the transposes of a value read twice.
SINK_PASS = "sink-transposes"
# After decompose (it works on the softmax's parts), before cse/dce, which
# drop the broadcast copies its readers no longer read.
UNMERGE_PASS = "unmerge-broadcasts"
LAYOUT_PASS = "channels-last"


@dataclass(frozen=True)
class ScheduleOptions:
    """The scheduling knobs of the compile job (CLI: `--max-registers`,
    `--shared-memory-limit`, `--gemm`, `--no-library-epilogue`, `--conv`,
    `--conv-tf32`, `--attention`, `--no-library-timing`); 0 means the
    target's limit."""

    max_registers: int = 0
    shared_memory_limit: int = 0
    gemm: str = "auto"
    library_epilogue: bool = True  # False: `library-epilogue=false` (docs/scheduling.md)
    conv: str = "auto"  # `--conv`: cuDNN or fusec's kernel per convolution
    conv_tf32: bool = False  # `--conv-tf32`: f32 library convolutions on TF32 tensor cores
    attention: str = "auto"  # `--attention`: cuDNN's fused attention or fusec's kernel
    # time each cuDNN convolution a choice weighs on the GPU compiled for
    # (`compiler/library_clock.py`); False: `--no-library-timing`
    library_timing: bool = True
    # seconds register-budget may wait for ptxas counts (None: its default;
    # 0: counts of kernels built before only, for a compile that builds none)
    ptxas_wait: float | None = None


@dataclass(frozen=True)
class PipelineOptions:
    """The compile flags that shape the default pipeline."""

    fusion: bool = True
    target: str = "auto"
    check_precision: bool = False
    fold_constants: bool = True
    schedule: ScheduleOptions = field(default_factory=ScheduleOptions)


def default_pipeline(registry: PassRegistry, options: PipelineOptions) -> str:
    """The default pipeline's spec for `options`."""
    # fold-empty always, and first: no kernel can compute a tensor with a
    # zero-size dimension, and a softmax over an empty axis is empty while
    # its decomposition would take the maximum of nothing.
    sched = options.schedule
    conv: dict[str, str | int] = {} if sched.conv == "auto" else {"conv": sched.conv}
    if sched.conv_tf32:
        conv["conv_tf32"] = True
    # After sink-transposes, which would lift the transposes it moves down back
    # up; before cse (it leaves duplicate transposes) and fold-constants (which
    # transposes constant weights once). Without fusion every transpose would be
    # a kernel: it only writes channels-last convolutions back then.
    layout = _with(LAYOUT_PASS, target=options.target, **conv,
                   **({} if options.fusion else {"nhwc": False}))
    passes = ["fold-empty", "decompose", *([SINK_PASS, UNMERGE_PASS] if options.fusion else []),
              layout, *CLEANUP_PASSES]
    if options.fold_constants:  # after decompose, which exposes BatchNorm's per-channel algebra
        passes.append(FOLD_PASS)
    if options.fusion and ATTENTION_PASS in registry.factories:  # before grouping: it makes groups
        extra = {"backend": options.schedule.attention} if options.schedule.attention != "auto" \
            else {}
        passes.append(_with(ATTENTION_PASS, target=options.target, gemm=options.schedule.gemm,
                            **extra))
    if options.fusion and FUSION_PASS in registry.factories:
        cls = registry.get(FUSION_PASS)
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) \
            else set()
        given: dict[str, str | int] = {"target": options.target, "gemm": options.schedule.gemm}
        if not options.schedule.library_epilogue:
            given["library_epilogue"] = False
        passes.append(_with(FUSION_PASS, **{k: v for k, v in given.items() if k in fields}))
        if options.check_precision:
            passes.append(CHECK_PRECISION_PASS)
    passes.append("group-each-op")
    # `auto` is probed once per process (analysis/targets.py), so every pass sees one profile.
    target = options.target
    wait = {} if sched.ptxas_wait is None else {"ptxas_wait": sched.ptxas_wait}
    off: dict[str, str | int] = {} if sched.library_epilogue else {"library_epilogue": False}
    off.update(conv)
    # register-budget takes tile-and-promote's library choices as they will
    # be made: a group a library computes has no kernel to count
    gemm = {} if sched.gemm == "auto" else {"gemm": sched.gemm}
    passes.append(_with("register-budget", target=target, max_registers=sched.max_registers,
                        **wait, **gemm, **off))
    passes.append(_with("tile-and-promote", target=target,
                        shared_memory_limit=sched.shared_memory_limit, gemm=sched.gemm, **off))
    return ",".join(passes)


def _with(name: str, **options: str | float) -> str:
    """`name{a=1 b="x"}`, option names spelled as on the command line
    (`name` alone without options)."""
    if not options:
        return name
    text = " ".join(f"{k.replace('_', '-')}={_value(v)}" for k, v in options.items())
    return f"{name}{{{text}}}"


def _value(v: str | float) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"' if isinstance(v, str) else str(v)
