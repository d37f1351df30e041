"""The cost model: a roofline time per kernel and the gain of one fusion.

A kernel moving `B` bytes of DRAM traffic and doing `F` flops takes

    T(kernel) = max(B / bandwidth, F / fp32_peak) / utilization + launch

where `utilization = min(1, parallel threads / resident threads of the GPU)`
charges kernels too small to fill the machine. Fusing kernels `a` and `b`
into `f` gains

    dT = T_mem - T_overlap - T_spill
    T_mem     = (B_a + B_b - B_f) / bandwidth + (launches saved) * launch
    T_overlap = (F_f - F_a - F_b)^+ / fp32_peak            (recomputed work)
              + (idle_f - idle_a - idle_b)^+               (lost parallelism)
                where idle_k = body_k * (1 / utilization_k - 1), counted only
                when `a` or `b` fills the GPU and `f` does not
    T_spill   = (spill_f - spill_a - spill_b)^+
                where spill_k = max(0, regs_k - register_budget) * 4 B * 2
                                * parallel_k / (bandwidth * local_memory_bandwidth_factor)

Every constant is a field of the `Target` profile (`analysis/targets.py`);
the schedule constants below mirror what code generation does.

```python
from fusec.analysis.cost_model import KernelCost, fusion_gain
g = fusion_gain(h200, a, b, fused)
g.delta > 0, g.t_mem, g.saved_bytes
```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.ir import Operation

from fusec.analysis.half_math_cost import half_form_scale
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

POINTWISE_ELEMENTS_PER_THREAD = 4
"""A pointwise kernel handles 4 consecutive elements per thread (16-byte
accesses; DESIGN.md, measured 96% of copy on H200)."""

GEMM_OUTPUTS_PER_THREAD = 64
"""A tiled GEMM computes an 8x8 register tile of outputs per thread."""

REGISTER_BYTES = 4

# Flops per element of the result for elementwise ops whose cost is not one
# instruction; transcendental functions expand to a polynomial or a MUFU op
# plus corrections (erf-form gelu is the longest).
ELEMENTWISE_FLOPS: dict[type[Operation], int] = {
    nn.ExpOp: 4, nn.LogOp: 4, nn.TanhOp: 6, nn.ErfOp: 8, nn.SigmoidOp: 6,
    nn.SiluOp: 7, nn.GeluOp: 12, nn.PowOp: 8, nn.SqrtOp: 2, nn.RsqrtOp: 2,
    nn.ReciprocalOp: 2, nn.DivOp: 2,
    # libdevice's sinf/cosf: a three-term range reduction and one of two
    # polynomials by quadrant, 28 PTX instructions where erf's 23 are priced 8
    # (angles past 105615 take a slower, exact reduction: rare, not priced)
    nn.SinOp: 10, nn.CosOp: 10,
}


KERNEL_PATHS: dict[str, Callable[[Target], tuple[float, float]]] = {
    "roofline": lambda t: (t.memory_bandwidth, t.fp32_flops),
    "pointwise": lambda t: (t.memory_bandwidth * t.pointwise_bandwidth_fraction, t.fp32_flops),
    # transposed operands staged through a shared tile: loads and stores both
    # coalesced, so priced as a pointwise kernel's traffic
    "pointwise_transpose": lambda t: (t.memory_bandwidth * t.pointwise_bandwidth_fraction,
                                      t.fp32_flops),
    "reduction": lambda t: (t.memory_bandwidth * t.reduction_bandwidth_fraction, t.fp32_flops),
    "window_tiled": lambda t: (t.memory_bandwidth, t.fp32_flops * t.window_tiled_flops_fraction),
    "window_direct": lambda t: (t.memory_bandwidth,
                                t.fp32_flops * t.direct_window_flops_fraction),
    "conv_pool": lambda t: (t.memory_bandwidth, t.fp32_flops * t.direct_window_flops_fraction),
    "simt_gemm": lambda t: (t.memory_bandwidth, t.fused_gemm_flops),
    "library_gemm": lambda t: (t.memory_bandwidth, t.library_gemm_flops),
    "library_gemm_half": lambda t: (t.memory_bandwidth, t.half_gemm_flops),
}
"""The (bytes/s, FLOP/s) each emitted kernel reaches, from the target
profile: pointwise and reduction kernels a fraction of the copy bandwidth;
tiled window kernels (GEMM-like and halo paths, codegen/window_tiled.py) and
direct-loop convolutions (codegen/window.py's direct path, the conv loop of
codegen/conv_pool.py) a fraction of the fp32 peak; fusec's SIMT GEMM and the
library GEMM their measured rates."""


@dataclass(frozen=True)
class KernelCost:
    """What one kernel costs the machine."""

    bytes_moved: int
    """DRAM bytes read (distinct inputs) plus written (results)."""
    flops: float
    """Floating-point operations over the whole launch."""
    parallel: int
    """Threads the schedule launches (independent work items)."""
    registers: int
    """Estimated registers per thread."""
    launches: int = 1
    path: str = "roofline"
    """The emitted kernel (`KERNEL_PATHS`): which throughputs of the target
    bound it. "roofline" is the plain `bandwidth` / `fp32_flops` roof."""

    def rates(self, target: Target) -> tuple[float, float]:
        """(bytes/s, FLOP/s) the kernel of this `path` reaches on `target`."""
        bandwidth, flops = KERNEL_PATHS[self.path](target)
        return bandwidth, flops

    def busy_time(self, target: Target) -> float:
        """The kernel's time without the idle-GPU charge: body, spills and
        launches. Summed over a program's kernels it is the estimate that
        fusion never makes worse (docs/fusion.md)."""
        return (self.body_time(target) + self.spill_time(target)
                + self.launches * target.launch_overhead)

    def utilization(self, target: Target) -> float:
        """Fraction of the GPU's resident threads this kernel keeps busy."""
        return max(1e-9, min(1.0, self.parallel / target.max_resident_threads))

    def body_time(self, target: Target) -> float:
        """The roofline without launch overhead or utilization."""
        bandwidth, flops = self.rates(target)
        return max(self.bytes_moved / bandwidth, self.flops / flops)

    def idle_time(self, target: Target) -> float:
        """Time added because the kernel is too small to fill the GPU."""
        return self.body_time(target) * (1.0 / self.utilization(target) - 1.0)

    def spill_time(self, target: Target) -> float:
        """Local-memory traffic of registers over the budget (store + load)."""
        excess = max(0, self.registers - target.register_budget)
        traffic = excess * REGISTER_BYTES * 2 * self.parallel
        return traffic / (target.memory_bandwidth * target.local_memory_bandwidth_factor)

    def time(self, target: Target) -> float:
        """`max(bytes/BW, flops/peak) / utilization + launch + spills`."""
        return (
            self.body_time(target) + self.idle_time(target) + self.spill_time(target)
            + self.launches * target.launch_overhead
        )


@dataclass(frozen=True)
class FusionGain:
    """`dT = T_mem - T_overlap - T_spill` of one candidate fusion (seconds)."""

    t_mem: float
    t_overlap: float
    t_spill: float
    saved_bytes: int
    saved_launches: int
    note: str = ""  # a fusion rule that decided despite dT (fusion_legality.gain_ok)

    @property
    def delta(self) -> float:
        """Seconds saved; positive means the fusion pays."""
        return self.t_mem - self.t_overlap - self.t_spill

    def summary(self) -> str:
        """`dT = 60.3 us (T_mem 60.3 - T_overlap 0.0 - T_spill 0.0)`."""
        text = (
            f"dT = {_us(self.delta)} us (T_mem {_us(self.t_mem)} - T_overlap "
            f"{_us(self.t_overlap)} - T_spill {_us(self.t_spill)})"
        )
        return f"{text}; {self.note}" if self.note else text


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def fusion_gain(target: Target, a: KernelCost, b: KernelCost, fused: KernelCost) -> FusionGain:
    """The gain of running `fused` instead of `a` then `b` (formulas above)."""
    saved_bytes = a.bytes_moved + b.bytes_moved - fused.bytes_moved
    saved_launches = a.launches + b.launches - fused.launches
    t_mem = saved_bytes / target.memory_bandwidth + saved_launches * target.launch_overhead
    recompute = max(0.0, fused.flops - a.flops - b.flops) / target.fp32_flops
    idle = 0.0
    # Lost parallelism counts only when a separate kernel could fill the GPU
    # and the fused one cannot; when neither can, both are latency-bound and
    # the utilization model would charge bytes a handful of threads pipeline.
    if fused.parallel < target.max_resident_threads <= max(a.parallel, b.parallel):
        idle = fused.idle_time(target) - a.idle_time(target) - b.idle_time(target)
    spill = fused.spill_time(target) - a.spill_time(target) - b.spill_time(target)
    return FusionGain(t_mem, recompute + max(0.0, idle), max(0.0, spill), saved_bytes,
                      saved_launches)


@dataclass(frozen=True)
class ScheduleTimes:
    """The fused kernel's estimated time with the schedule it will get,
    against its parts' times with their own schedules (seconds)."""

    fused: float
    """The fused kernel's busy time plus the parallelism it loses."""
    parts: tuple[float, float]
    fused_path: str
    part_paths: tuple[str, str]

    @property
    def slower(self) -> bool:
        """The fused kernel is estimated slower than its parts."""
        return self.fused > sum(self.parts)

    def summary(self) -> str:
        """`fused (conv_pool) 2756.0 us vs parts 183.2 us (window_tiled) + 8.4 us (...)`."""
        (pa, pb), (na, nb) = self.parts, self.part_paths
        return (f"fused ({self.fused_path}) {_us(self.fused)} us vs parts {_us(pa)} us ({na}) "
                f"+ {_us(pb)} us ({nb})")


def schedule_times(target: Target, a: KernelCost, b: KernelCost,
                   fused: KernelCost) -> ScheduleTimes:
    """`busy(fused) + lost parallelism` against `busy(a) + busy(b)`: each
    kernel priced on its own path (`KERNEL_PATHS`), launches included. The
    idle charge is `fusion_gain`'s: only when a part fills the GPU and the
    fused kernel does not."""
    idle = 0.0
    if fused.parallel < target.max_resident_threads <= max(a.parallel, b.parallel):
        idle = max(0.0, fused.idle_time(target) - a.idle_time(target) - b.idle_time(target))
    return ScheduleTimes(fused.busy_time(target) + idle,
                         (a.busy_time(target), b.busy_time(target)), fused.path,
                         (a.path, b.path))


# --- per-op estimates -----------------------------------------------------------------


def op_flops(op: Operation, iteration_elements: int | None = None) -> float:
    """Flops of `op`; an elementwise op evaluated over a larger iteration
    space than its own result (fused into a broadcasting group) is counted
    once per iteration point, which is what recomputation costs."""
    kind = op_kind(op)
    if isinstance(op, nn.MatmulOp):
        a, b = tensor_shape(op.operands[0]), tensor_shape(op.operands[1])
        return 2.0 * numel(tensor_shape(op.results[0])) * a[-1] if b else 0.0
    if isinstance(op, nn.Conv2dOp):
        w = tensor_shape(op.operands[1])
        return 2.0 * numel(tensor_shape(op.results[0])) * numel(w[1:])
    if kind in (OpKind.REDUCTION, OpKind.WINDOW):
        return float(numel(tensor_shape(op.operands[0])))
    if kind in (OpKind.ELEMENTWISE, OpKind.BROADCAST) and op.results:
        elements = numel(tensor_shape(op.results[0]))
        points = max(elements, iteration_elements or 0)
        return float(points * elementwise_flops(op))
    return 0.0


def elementwise_flops(op: Operation) -> float:
    """Flops per element of the result of the elementwise `op` (one
    instruction unless `ELEMENTWISE_FLOPS` says more; f16/bf16 erf, tanh
    and gelu get cheaper forms, analysis/half_math_cost.py)."""
    return ELEMENTWISE_FLOPS.get(type(op), 1) * half_form_scale(op)


def parallel_threads(kind: str, iteration_shape: tuple[int, ...], row: int, target: Target) -> int:
    """Threads a group of `kind` launches: pointwise 4 elements per thread; a
    row reduction a block of up to `max_threads_per_block` per row; a GEMM an
    8x8 tile per thread; a window op one output per thread."""
    total = numel(iteration_shape)
    if kind == "pointwise":
        return max(1, -(-total // POINTWISE_ELEMENTS_PER_THREAD))
    if kind == "reduction" and row > 0:
        rows = max(1, total // row)
        per_row = min(target.max_threads_per_block, -(-row // POINTWISE_ELEMENTS_PER_THREAD))
        return rows * max(1, per_row)
    if kind == "contraction":
        return max(1, total // GEMM_OUTPUTS_PER_THREAD)
    return max(1, total)


# --- library GEMM versus the fused SIMT GEMM ------------------------------------------


@dataclass(frozen=True)
class GemmChoice:
    """The cost model's decision for one matmul: a library GEMM followed by a
    separate epilogue kernel, or fusec's fused SIMT kernel."""

    library: bool
    t_library: float  # seconds: the GEMM, plus the epilogue kernel re-reading C
    t_fused: float  # seconds: one kernel, epilogue in registers
    reason: str

    def summary(self) -> str:
        """`library GEMM 2.71 ms + epilogue vs fused SIMT 5.09 ms: library`."""
        return (f"library GEMM + epilogue {_us(self.t_library)} us vs fused SIMT "
                f"{_us(self.t_fused)} us: {'library' if self.library else 'fused'} ({self.reason})")


def gemm_choice(target: Target, flops: float, operand_bytes: int, result_bytes: int,
                epilogue_bytes: int, mode: str = "auto", library_available: bool = False,
                element: str = "f32", tf32: bool = False) -> GemmChoice:
    """Library or fused, by `mode` ("library", "fused", "auto"). A library
    GEMM runs at `target.library_gemm_rate(element, tf32)` (tensor cores for
    f16/bf16, TF32 when CuPy is asked for it) and writes C; the epilogue (when there
    is one, `epilogue_bytes` > 0) is a second kernel reading C and its other
    inputs and writing the result. The fused kernel runs at `fused_gemm_flops`
    (f32 FMAs whatever the operands' type: half operands are widened).
    `auto` takes the library only when it is available and faster."""
    io = operand_bytes + result_bytes
    t_lib = max(io / target.memory_bandwidth, flops / target.library_gemm_rate(element, tf32))
    t_lib += target.launch_overhead
    if epilogue_bytes:
        t_lib += target.kernel_time(epilogue_bytes + 2 * result_bytes, 0.0)
    t_fused = max((io + epilogue_bytes) / target.memory_bandwidth,
                  flops / target.fused_gemm_flops) + target.launch_overhead
    library, reason = library_mode(mode, "--gemm", library_available, "CuPy is not importable",
                                   t_lib < t_fused, "the fused kernel is faster")
    return GemmChoice(library, t_lib, t_fused, reason)


def library_mode(mode: str, flag: str, available: bool, missing: str, faster: bool,
                 slower: str) -> tuple[bool, str]:
    """Whether a library call is taken, and why: as `flag` ("--gemm") says
    ("library", "fused"), else (`auto`) when the library is `available`
    (`missing` says why not) and `faster` (`slower` says why not)."""
    if mode in ("library", "fused"):
        return mode == "library", f"{flag} {mode}"
    if not available:
        return False, missing
    return faster, "faster" if faster else slower


@dataclass(frozen=True)
class ConvChoice:
    """The cost model's decision for one convolution: a library convolution
    (cuDNN) followed by a separate epilogue kernel, or fusec's own window
    kernel with its epilogue in registers."""

    library: bool
    t_library: float  # seconds: the convolution, plus the epilogue kernel re-reading y
    t_own: float  # seconds: fusec's window kernel, epilogue included
    reason: str
    t_call: float = 0.0  # seconds of `t_library` that are the library call itself

    def summary(self) -> str:
        """`library conv + epilogue 41.2 us vs own kernel 230.9 us: library (faster)`."""
        return (f"library conv + epilogue {_us(self.t_library)} us vs own kernel "
                f"{_us(self.t_own)} us: {'library' if self.library else 'own'} ({self.reason})")


def library_conv_rate(target: Target, element: str, tf32: bool = False,
                      group_outputs: int = 0) -> float:
    """FLOP/s of a library convolution on `element` (see `conv_choice`)."""
    tile_use = min(1.0, group_outputs / target.library_conv_tile_n) if group_outputs else 1.0
    tensor_cores = element in ("f16", "bf16") or (element == "f32" and tf32)
    fraction = target.library_conv_fraction if tensor_cores else target.library_conv_fma_fraction
    return target.library_gemm_rate(element, tf32) * fraction * tile_use


def conv_choice(target: Target, flops: float, io_bytes: int, result_bytes: int,
                epilogue_bytes: int, own_flops_fraction: float, mode: str = "auto",
                library_available: bool = False, element: str = "f32",
                tf32: bool = False, group_outputs: int = 0,
                prologue_bytes: int = 0) -> ConvChoice:
    """Library or own, by `mode` ("library", "fused", "auto"). The library
    convolution runs at `target.library_conv_fraction` of the library GEMM
    rate of `element` (tensor cores for halves, TF32 where allowed) and
    writes y; an epilogue (`epilogue_bytes` > 0: the other inputs it reads)
    is a second kernel reading y and writing the result. fusec's kernel
    computes in f32 FMAs at `own_flops_fraction` of `fp32_flops` (the tiled
    or the direct path's) and moves `io_bytes` plus the epilogue's inputs at
    `target.own_conv_bandwidth_fraction` of the bandwidth.
    `group_outputs` (output channels per group; 0: as many as a tile holds)
    below `target.library_conv_tile_n` slows the library in proportion; a
    prologue fusec's kernel computes while it stages its input is a kernel of
    its own before the library call (`prologue_bytes`: what it moves).
    `auto` takes the library only when it is available and faster."""
    rate = library_conv_rate(target, element, tf32, group_outputs)
    t_call = max(io_bytes / target.memory_bandwidth, flops / rate) + target.launch_overhead
    t_lib = t_call
    if epilogue_bytes:
        t_lib += target.kernel_time(epilogue_bytes + 2 * result_bytes, 0.0)
    if prologue_bytes:
        t_lib += target.kernel_time(prologue_bytes, 0.0)
    own_bandwidth = target.memory_bandwidth * target.own_conv_bandwidth_fraction
    t_own = max((io_bytes + epilogue_bytes) / own_bandwidth,
                flops / (target.fp32_flops * own_flops_fraction)) + target.launch_overhead
    library, reason = library_mode(mode, "--conv", library_available, "cuDNN is not installed",
                                   t_lib < t_own, "the own kernel is faster")
    return ConvChoice(library, t_lib, t_own, reason, t_call)
