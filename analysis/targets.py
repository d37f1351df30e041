"""Hardware profiles: the numbers the cost model and the fusion legality
checks read, one frozen dataclass per GPU.

Every number that steers a fusion decision lives here, named and documented,
so that a reader can see why `form-fusion-groups{target=orin}` fuses less
than `target=h200`:

```python
from fusec.analysis.targets import get_target
t = get_target("h200")
t.memory_bandwidth   # 4.23e12 bytes/s, measured device-to-device copy (read + write)
t.kernel_time(bytes_moved=2**30, flops=0)   # roofline seconds, launch included
```

`"auto"` reads the device numba.cuda sees (SM count, shared memory, register
file, L2, clock) on top of the closest known profile; without a GPU it falls
back to h200 and says so in `resolve_target(...)`'s note.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

from fusec.analysis.diagnostics import FusecError

STATIC_SHARED_BYTES = 48 * 1024
"""Bytes of `cuda.shared.array` a block may declare statically, and of dynamic
shared memory a launch may take without the opt-in attribute: the same on
every CUDA GPU. The default of `Target.static_shared_memory_per_block`, which
is what the schedules and emitters read (a compile asks its target); the
runtime reads it here, for the driver's default on whatever device it runs."""

WARP_SIZE = 32
"""Threads of a warp, on every CUDA GPU: the one name every emitter and
schedule uses for it."""


def ptxas_arch_of(compute_capability: tuple[int, int]) -> str:
    """ptxas's `-arch` for a compute capability: `sm_90` for (9, 0). The build
    workers, which see a kernel's capability and no target, derive it here too."""
    major, minor = compute_capability
    return f"sm_{major}{minor}"


@dataclass(frozen=True)
class Target:
    """One GPU as fusion sees it. Rates are sustained (measured where noted),
    not datasheet peaks, because the cost model predicts achieved time."""

    name: str
    description: str
    sms: int
    """Streaming multiprocessors: how many blocks run at once, times occupancy."""
    registers_per_sm: int
    """32-bit registers in one SM's register file (shared by its resident threads)."""
    max_registers_per_thread: int
    """Hard limit per thread (255 on every CUDA GPU since Kepler); past it ptxas spills."""
    register_budget: int
    """Registers per thread fusion aims to stay under so that enough warps stay
    resident to hide memory latency (`registers_per_sm / register_budget`
    threads per SM); more than this costs spills or occupancy (`T_spill`)."""
    max_threads_per_block: int
    """Largest block the hardware launches."""
    max_threads_per_sm: int
    """Resident threads per SM at full occupancy."""
    shared_memory_per_sm: int
    """Bytes of shared memory per SM (the carve-out maximum)."""
    shared_memory_per_block: int
    """Bytes one block may allocate: dynamic shared memory past 48 KiB, with
    the opt-in attribute the runtime raises (`runtime/dynamic_shared.py`);
    NVIDIA's per-compute-capability limit (CUDA C++ Programming Guide,
    "Technical Specifications"): 227 KiB on sm_90, 163 KiB on sm_80/sm_87,
    99 KiB on sm_86/sm_89."""
    l2_bytes: int
    """L2 cache size: intermediates smaller than this are cheap to re-read."""
    memory_bandwidth: float
    """Bytes/s of DRAM traffic actually achieved by a copy (read + write counted)."""
    fp32_flops: float
    """Sustained fp32 FLOP/s of a good GEMM (cuBLAS-class), the compute roof."""
    launch_overhead: float
    """Seconds per kernel launch as the runtime pays it: a CUDA-graph replay
    (the runtime captures graphs for repeated calls)."""
    python_launch_overhead: float
    """Seconds per launch through numba's Python dispatcher (first calls, no graph)."""
    local_memory_bandwidth_factor: float = 4.0
    """How much faster spilled-register traffic (local memory, mostly L1/L2 hits)
    moves than DRAM; `T_spill` divides spill bytes by `bandwidth * factor`."""
    library_gemm_flops: float = 50.8e12
    """fp32 FLOP/s of the library GEMM (cuBLAS SGEMM through CuPy), measured on
    H200 at 4096^3; the cost model's rate for a library GEMM launch."""
    half_gemm_flops: float = 790e12
    """fp16/bf16 FLOP/s of the library GEMM (cuBLAS tensor cores, f32
    accumulation), dense, measured on H200; the rate of a half library GEMM."""
    tf32_gemm_flops: float = 400e12
    """f32 FLOP/s of the library GEMM when CuPy runs it on TF32 tensor cores
    (`CUPY_TF32=1`), measured on H200."""
    library_conv_fraction: float = 0.25
    """Fraction of `library_gemm_rate` a library convolution (cuDNN, implicit
    GEMM) reaches on a dense convolution: the cost model's rate for one
    (`cost_model.conv_choice`). Measured on an H100 (bench/conv_sweep.py,
    bench/results/2026-12-05-NVIDIA_H100_80GB_HBM3-conv-sweep-085cc6b.md):
    ResNet-class f16 layers at batch 32 ran at 51-178 TFLOP/s, cuDNN call
    and epilogue kernel together, 0.07-0.23 of the 790 TFLOP/s GEMM rate."""
    library_attention_fraction: float = 0.17
    """Fraction of the half library GEMM rate (`half_gemm_flops`) that
    cuDNN's fused attention (`runtime/cudnn_sdpa.py`) reaches: on an H100
    (2026-12-06) its kernel ran ViT-B/16's attention in bf16 (B16 H12 S197
    D64, 1.9 GFLOP) in 13.6 us, 140 TFLOP/s (`bench/model_kernels.py`,
    inside inductor's graph), 0.18 of 790; on the H200, B8 H12 S512 D64 in
    52 us, 124 TFLOP/s (F.sdpa, 2026-12-01), 0.16."""
    library_conv_fma_fraction: float = 0.9
    """The same fraction for a library convolution on FMA math (f32 without
    TF32, f64), of the library GEMM's f32 rate, its output channels' tile use
    (`library_conv_tile_n`) apart: on an H100 (bench/conv_sweep.py, TF32
    off) the dense f32 layers ran at 0.55-1.07 of cuBLAS's 51 TFLOP/s so
    counted, median 0.93 (3x3 at 28x28 and 56x56 1.03 and 1.07, 5x5 0.93, 3x3
    stride 2 0.55; `*-conv-sweep-fcb3cf8.md`, `*-conv-sweep-a1fed80.md`). It
    was 0.5, the median of the raw rates, when cuDNN still converted NCHW
    tensors around each call and the tile use was not counted apart: the
    model then gave 3x3 layers of 128 and 256 channels fusec's own kernel at
    0.54x and 0.81x of cuDNN's time."""
    own_conv_flops_fraction: float = 0.5
    """Fraction of `fp32_flops` fusec's own tiled convolution kernel reaches
    on a dense, compute-bound layer (its epilogue included), as the
    convolution choice prices it: 0.26-0.62, median 0.51, over the dense
    layers of that sweep (3x3, 3x3 stride 2, 5x5, 7x7 stride 2)."""
    own_conv_bandwidth_fraction: float = 0.33
    """Fraction of `memory_bandwidth` fusec's own convolution kernel reaches
    on a memory-bound layer (1x1 at 56x56: 0.32-0.33 on that sweep)."""
    library_conv_tile_n: int = 128
    """Output channels one tile of a library convolution's implicit GEMM
    covers: a convolution whose groups have fewer output channels each
    leaves the rest of every tile idle (measured: a 32-group 3x3 convolution
    with 8 channels per group ran at 14 TFLOP/s, a depthwise one at 2.3)."""
    fused_gemm_flops: float = 27.0e12
    """fp32 FLOP/s of fusec's fused SIMT GEMM with its epilogue (bias + gelu),
    measured on H200 at 4096^3; the rate of a fused contraction kernel."""
    pointwise_bandwidth_fraction: float = 0.97
    """Fraction of `memory_bandwidth` a pointwise kernel reaches: measured on
    H200 (scheduling/pointwise.py: 4 strided elements per thread, 97% of copy)."""
    reduction_bandwidth_fraction: float = 0.85
    """Fraction of `memory_bandwidth` a row reduction reaches (row, column and
    split schedules alike). Not measured per schedule yet: set below the
    pointwise figure because a block-per-row kernel ends every row with a
    tree over shared memory and a barrier."""
    window_tiled_flops_fraction: float = 0.80
    """Fraction of `fp32_flops` of a tiled window kernel (GEMM-like and halo
    paths, codegen/window_tiled.py). Derived from the H200 measurement of
    bench/programs/conv_relu_pool.mlir unfused (N32 C64 56x56 3x3): 0.19 ms
    for conv + epilogue + pool, of which about 0.01 ms is the pool's memory
    traffic; 7.40 GFLOP / 0.18 ms = 41 TFLOP/s = 0.80 of 50.8."""
    direct_window_flops_fraction: float = 0.053
    """Fraction of `fp32_flops` of a direct-loop conv (one output per thread,
    every tap read from global memory: codegen/window.py's direct path and
    the conv loop of codegen/conv_pool.py). Derived from the H200 measurement
    of the same program fused into conv + pool: 7.40 GFLOP / 2.74 ms =
    2.70 TFLOP/s = 0.053 of 50.8."""
    fma_lanes_per_sm: int = 128
    """fp32 FMAs one SM issues per clock (Volta and later: 4 x 32 lanes); with
    `shared_lanes_per_sm`, what the attention schedule balances."""
    shared_lanes_per_sm: int = 32
    """32-bit shared-memory words one SM reads per clock (32 banks)."""
    warp_issue_per_sm: int = 4
    """Warp instructions one SM issues per clock (4 schedulers)."""
    sfu_lanes_per_sm: int = 16
    """Exponentials (MUFU) one SM computes per clock."""
    attention_efficiency: float = 0.39
    """Fraction of the attention schedule's modelled clocks the fused SIMT
    kernel reaches (latency, barriers, the softmax's serial part). Measured
    on the H200 (2026-12-01, bench/attention_sweep.py, fp32 B8 H12 S512 D64):
    the model's first tile, 64 queries x 32 keys with 4x2 scores per thread,
    ran in 0.458 ms where the clocks at full efficiency give 0.18 ms; the
    best of 19 tiles ran in 0.445 ms."""
    attention_unfused_efficiency: float = 0.51
    """Fraction of the three-kernel attention estimate (two SIMT GEMMs and
    the softmax at the modelled rates) that the three kernels reach.
    Measured on the H200 (2026-12-01, bench attention row, fp32 B8 H12 S512
    D64): 0.583 ms where the rates give 0.297 ms."""
    warp_mma_fraction: float = 1.0
    """Fraction of the library GEMM's tensor-core rate (`library_gemm_rate`)
    that warp-level `mma.sync` products reach in fusec's kernels. With 0.5
    the mma attention model put f32 tiles (TF32x3: three products each)
    2.3x further from their measured times than bf16 tiles; with 1.0, 1.7x
    (12 tiles, H200, 2026-12-01): the kernels are issue-bound before the
    tensor cores are."""
    attention_mma_efficiency: float = 0.22
    """Fraction of the modelled clocks of an mma attention tile
    (`scheduling/attention_mma_schedule.py`) that the kernel reaches: the
    geometric mean over the 12 tiles measured on the H200 (2026-12-01,
    bench/attention_sweep.py, B8 H12 S512 D64, f32 and bf16, 0.17 to 0.28
    each; best f32 128 x 32 keys 0.261 ms, bf16 128 x 64 0.150). Nsight
    Compute on the bf16 tile: one block of 8 warps per SM (registers), 4.5
    cycles per issued instruction."""
    static_shared_memory_per_block: int = STATIC_SHARED_BYTES
    """Bytes of `cuda.shared.array` a block may declare statically (every
    CUDA GPU): the limit of every kernel whose tiles are static arrays;
    only a kernel that takes its tiles from dynamic shared memory goes up
    to `shared_memory_per_block`."""
    compute_capability: tuple[int, int] = (9, 0)
    """What kernels are compiled for: numba's PTX, ptxas's architecture
    (`ptxas_arch`) and the kernel cache key of a compile for this target."""
    max_blocks_per_sm: int = 32
    """Blocks one SM holds at once, whatever their size (32 on sm_80 and
    sm_90): with registers, shared memory and threads, what bounds the
    blocks resident per SM."""
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    """Threads a block may have along x, y and z (their product at most
    `max_threads_per_block`)."""
    max_grid_x: int = 2**31 - 1
    """Blocks a launch may have along grid x (CUDA's limit since sm_30)."""
    max_grid_yz: int = 65535
    """Blocks a launch may have along grid y and along z: an emitter walks a
    larger dimension there with a grid-stride loop and `codegen/launch_grid.py`
    clamps the launch to this."""

    @property
    def static_shared_limit(self) -> int:
        """Bytes a kernel of static shared arrays may use on this target."""
        return min(self.shared_memory_per_block, self.static_shared_memory_per_block)

    @property
    def ptxas_arch(self) -> str:
        """ptxas's `-arch` for this target's compute capability (`sm_90`)."""
        return ptxas_arch_of(self.compute_capability)

    @property
    def max_resident_threads(self) -> int:
        """Threads the whole GPU holds at full occupancy: parallel work below
        this leaves SMs idle (`T_overlap`)."""
        return self.sms * self.max_threads_per_sm

    def library_gemm_rate(self, element: str, tf32: bool = False) -> float:
        """FLOP/s of a library GEMM on `element` operands (f16/bf16: tensor
        cores; f32: SGEMM, or TF32 tensor cores when `tf32`)."""
        if element in ("f16", "bf16"):
            return self.half_gemm_flops
        if element == "f32" and tf32:
            return self.tf32_gemm_flops
        return self.library_gemm_flops

    def library_attention_rate(self) -> float:
        """FLOP/s of cuDNN's fused attention (f16/bf16 operands)."""
        return self.half_gemm_flops * self.library_attention_fraction

    def kernel_time(self, bytes_moved: float, flops: float, launches: int = 1) -> float:
        """Roofline time of a kernel: `max(bytes/BW, flops/peak) + launch`."""
        return max(bytes_moved / self.memory_bandwidth, flops / self.fp32_flops) + (
            launches * self.launch_overhead
        )


_MIB = 1 << 20
_KIB = 1 << 10

# Measured on the project's H200 (shared/GPU.md, 2026-11-30): copy 4.23 TB/s,
# cuBLAS fp32 50.8 TFLOP/s (TF32 400, fp16/bf16 dense about 790), numba launch
# ~20 us, graph replay 0.8 us.
H200 = Target(
    name="h200",
    description="NVIDIA H200 SXM (Hopper, sm_90), HBM3e; rates measured here",
    sms=132,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    register_budget=128,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    shared_memory_per_sm=228 * _KIB,
    shared_memory_per_block=227 * _KIB,
    l2_bytes=60 * _MIB,
    memory_bandwidth=4.23e12,
    fp32_flops=50.8e12,
    launch_overhead=0.8e-6,
    python_launch_overhead=20e-6,
)

# Same GH100 die with HBM3: the copy rate scales with the datasheet ratio
# (3.35 / 4.8 of H200's measured figure); compute and launch as H200.
H100 = dataclasses.replace(
    H200,
    name="h100",
    description="NVIDIA H100 SXM (Hopper, sm_90), HBM3; bandwidth scaled from H200",
    l2_bytes=50 * _MIB,
    memory_bandwidth=2.95e12,
)

# Ampere GA100: 1.94 TB/s peak (80 GB), ~1.75 TB/s copy; fp32 SIMT 19.5 TFLOP/s
# peak, ~18 sustained; tensor cores fp16/bf16 312 and TF32 156 TFLOP/s peak
# (dense), 80% sustained; 164 KiB shared memory per SM.
A100 = Target(
    name="a100",
    description="NVIDIA A100 SXM 80GB (Ampere, sm_80), HBM2e; datasheet-derived",
    sms=108,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    register_budget=128,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    shared_memory_per_sm=164 * _KIB,
    shared_memory_per_block=163 * _KIB,
    l2_bytes=40 * _MIB,
    memory_bandwidth=1.75e12,
    fp32_flops=18.0e12,
    library_gemm_flops=18.0e12,
    half_gemm_flops=250e12,
    tf32_gemm_flops=125e12,
    launch_overhead=1.0e-6,
    python_launch_overhead=20e-6,
    compute_capability=(8, 0),
)

# A consumer GDDR6X card (RTX 4090-like, Ada sm_89): 1.01 TB/s peak, ~0.92 copy;
# high fp32 rate, a big L2, only 1536 resident threads and 100 KiB per SM;
# fp16/bf16 tensor cores with f32 accumulation 165 TFLOP/s peak, TF32 83.
RTX4090 = Target(
    name="rtx4090",
    description="consumer GDDR6X card, RTX 4090-like (Ada, sm_89); datasheet-derived",
    sms=128,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    register_budget=128,
    max_threads_per_block=1024,
    max_threads_per_sm=1536,
    shared_memory_per_sm=100 * _KIB,
    shared_memory_per_block=99 * _KIB,
    l2_bytes=72 * _MIB,
    memory_bandwidth=0.92e12,
    fp32_flops=60.0e12,
    half_gemm_flops=140e12,
    tf32_gemm_flops=70e12,
    launch_overhead=1.0e-6,
    python_launch_overhead=20e-6,
    compute_capability=(8, 9),
)

# An embedded part (Jetson AGX Orin-like, Ampere GA10B): 16 SMs, LPDDR5 shared
# with the CPU (204.8 GB/s peak, ~170 achieved), 4 MB L2, slow launches;
# fp16 tensor cores about 42 TFLOP/s dense peak, TF32 about 21.
ORIN = Target(
    name="orin",
    description="embedded SoC GPU, Jetson AGX Orin-like (Ampere, sm_87); datasheet-derived",
    sms=16,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    register_budget=96,
    max_threads_per_block=1024,
    max_threads_per_sm=1536,
    shared_memory_per_sm=164 * _KIB,
    shared_memory_per_block=163 * _KIB,
    l2_bytes=4 * _MIB,
    memory_bandwidth=0.17e12,
    fp32_flops=4.5e12,
    library_gemm_flops=4.5e12,
    half_gemm_flops=35e12,
    tf32_gemm_flops=17e12,
    launch_overhead=3.0e-6,
    python_launch_overhead=40e-6,
    compute_capability=(8, 7),
)

TARGETS: dict[str, Target] = {t.name: t for t in (H200, H100, A100, RTX4090, ORIN)}
"""Known profiles by name; `"auto"` is resolved by `resolve_target`."""

DEFAULT_TARGET = "h200"


def get_target(name: str) -> Target:
    """The profile called `name` (`"auto"`: the device present, else h200)."""
    return resolve_target(name)[0]


def unknown_target(name: str) -> str | None:
    """The sentence for a target name that names no profile (None when it
    does, or is `auto`): every pass option and `--target` say the same."""
    if name.strip().lower() in (*TARGETS, "auto"):
        return None
    return f"unknown target '{name}'; known targets: {', '.join([*TARGETS, 'auto'])}"


def resolve_target(name: str) -> tuple[Target, str | None]:
    """The profile for `name` plus a note when `"auto"` had to guess.

    An unknown name is a `FusecError` listing the known ones.
    """
    key = name.strip().lower()
    if key == "auto":
        return _detect()
    problem = unknown_target(name)
    if problem is not None:
        raise FusecError(problem)
    return TARGETS[key], None


@functools.cache
def _detect() -> tuple[Target, str | None]:
    """Read the current CUDA device through numba, on top of the closest
    profile; once per process, so every pass and the driver see one profile.
    Without a GPU (asked of the driver library first), numba.cuda is not
    imported, so the runtime may still choose the simulator."""
    try:
        from fusec.analysis.gpu_driver import gpu_probe

        if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0") or not gpu_probe()[0]:
            raise RuntimeError("no CUDA device")
        from numba import config, cuda  # imported lazily: slow, and absent on some hosts

        if config.ENABLE_CUDASIM:
            raise RuntimeError("numba's CUDA simulator is not a GPU")
        if not cuda.is_available():
            raise RuntimeError("no CUDA device")
        dev = cuda.get_current_device()
        base = _closest_profile(str(dev.name))
        return _from_device(base, dev), None
    except Exception:  # any failure to probe means "no usable GPU here"
        return H200, "no GPU found; target 'auto' uses the h200 profile"


def _closest_profile(device_name: str) -> Target:
    lowered = device_name.lower().replace(" ", "")
    for key, profile in (("h200", H200), ("h100", H100), ("a100", A100),
                         ("4090", RTX4090), ("orin", ORIN)):
        if key in lowered:
            return profile
    return H200


def _from_device(base: Target, dev: object) -> Target:
    """`base` with the counts the driver reports (rates stay the profile's)."""

    def attr(name: str, default: int) -> int:
        return int(getattr(dev, name, default) or default)

    return dataclasses.replace(
        base,
        name="auto",
        description=f"{getattr(dev, 'name', 'GPU')!s} (read from the device; rates of {base.name})",
        sms=attr("MULTIPROCESSOR_COUNT", base.sms),
        registers_per_sm=attr("MAX_REGISTERS_PER_MULTIPROCESSOR", base.registers_per_sm),
        max_threads_per_block=attr("MAX_THREADS_PER_BLOCK", base.max_threads_per_block),
        max_threads_per_sm=attr("MAX_THREADS_PER_MULTIPROCESSOR", base.max_threads_per_sm),
        shared_memory_per_sm=attr(
            "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", base.shared_memory_per_sm
        ),
        shared_memory_per_block=attr(
            "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", base.shared_memory_per_block
        ),
        l2_bytes=attr("L2_CACHE_SIZE", base.l2_bytes),
        max_grid_x=attr("MAX_GRID_DIM_X", base.max_grid_x),
        max_grid_yz=min(attr("MAX_GRID_DIM_Y", base.max_grid_yz),
                        attr("MAX_GRID_DIM_Z", base.max_grid_yz)),
    )
