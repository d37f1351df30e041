"""The fuzzer's modes: what kind of program each draws, with which inputs,
on which device. `python -m fusec.fuzz --mode NAME` (several allowed, or
`all`) cycles through the chosen modes by graph index.

Adding a mode is one entry of `MODES`: a generator of programs (`graph`, any
`(rng, GenConfig) -> Graph`), a change of the generator's settings
(`config`), its inputs (`edges`), whether it runs on a real GPU when there is
one (`gpu`), or, for a mode that checks something other than a program's
numbers, its own `check(index, seed) -> Outcome`.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fusec.fuzz.check import Outcome
from fusec.fuzz.conv_graphs import conv_graph
from fusec.fuzz.generate import GenConfig, random_graph
from fusec.fuzz.graph import Graph
from fusec.fuzz.reuse_graphs import reuse_graph

GraphMaker = Callable[[np.random.Generator, GenConfig], Graph]
SIZES = ("small", "large")


def _same(config: GenConfig, sizes: str) -> GenConfig:
    return config


def _dtype(name: str) -> Callable[[GenConfig, str], GenConfig]:
    def config(c: GenConfig, sizes: str) -> GenConfig:
        return dataclasses.replace(c, dtype=name)
    return config


def _gpu_sizes(c: GenConfig, sizes: str) -> GenConfig:
    """Shapes spanning many blocks: axes up to 4096, 4M elements per tensor
    (`large`), or up to 40 and 1,500 elements, for the simulator (`small`)."""
    if sizes == "large":
        return dataclasses.replace(c, large_dim=4096, max_elements=1 << 22)
    return dataclasses.replace(c, large_dim=40, max_elements=1500, max_ops=min(c.max_ops, 6))


@dataclass(frozen=True)
class Mode:
    """One row of `MODES` (see the module docstring)."""

    name: str
    summary: str
    graph: GraphMaker = random_graph
    config: Callable[[GenConfig, str], GenConfig] = _same
    edges: str = "rate"  # "rate": --edge-rate of the programs get edge values; or "special"
    gpu: bool = False  # kernels run on the GPU when there is one (else the simulator)
    check: Callable[[int, int], Outcome] | None = None  # its own check of (index, seed)

    def rng(self, seed: int, index: int) -> np.random.Generator:
        """The random source of graph `index`: `default`'s is the same as
        before modes existed, so old seeds reproduce old programs."""
        if self.name == "default":
            return np.random.default_rng([seed, index])
        return np.random.default_rng([seed, index, zlib.crc32(self.name.encode())])


POISON_COUNT = 5  # poisoned entries per program of the poison modes


def _poison_tuning(index: int, seed: int) -> Outcome:
    """`fuzz/poison_tuning.py`'s check of program `index` of `seed`."""
    from fusec.fuzz.poison_tuning import poison_tuning  # it imports run.py, which imports this

    return poison_tuning(seed * 1_000_003 + index, POISON_COUNT).outcome


def _poison_kernels(index: int, seed: int) -> Outcome:
    """`fuzz/poison_kernels.py`'s check of program `index` of `seed`."""
    from fusec.fuzz.poison_kernels import poison_kernels  # as above

    return poison_kernels(seed * 1_000_003 + index, POISON_COUNT).outcome


MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("default", "every op, f32 or f16, tiny shapes"),
    Mode("f16", "every op, the whole program in f16", config=_dtype("f16")),
    Mode("bf16", "every op, the whole program in bf16", config=_dtype("bf16")),
    Mode("special", "every op; inputs with inf, NaN, +-3e38 and the half types' extremes, "
         "denormals and -0", edges="special"),
    Mode("conv", "conv2d stages (strides, pads, dilations, groups), batch norm, "
         "activations, pooling", graph=conv_graph),
    Mode("recompute", "a value read directly and through gather / transpose / reshape "
         "chains by reductions and pointwise ops", graph=reuse_graph),
    Mode("gpu", "every op, shapes spanning many blocks, on the GPU when there is one",
         config=_gpu_sizes, gpu=True),
    Mode("poison-tuning", "autotune into a tuning cache of its own, poison an entry, "
         "compile again: a warning and a right answer", check=_poison_tuning),
    Mode("poison-kernels", "count every kernel into a kernel cache of its own, poison an "
         "entry, compile again: a warning, the kernel rebuilt, a right answer",
         check=_poison_kernels),
)}


def parse_modes(names: list[str]) -> tuple[str, ...]:
    """The modes `--mode` names, in order (`all`: every mode); ValueError
    naming an unknown one."""
    chosen: list[str] = []
    for name in names or ["default"]:
        for part in name.split(","):
            if part == "all":
                chosen += list(MODES)
            elif part in MODES:
                chosen.append(part)
            else:
                raise ValueError(f"unknown mode '{part}' (modes: {', '.join(MODES)}, all)")
    return tuple(dict.fromkeys(chosen))


def mode_of(index: int, modes: tuple[str, ...]) -> Mode:
    """The mode graph `index` runs in when cycling through `modes`."""
    return MODES[modes[index % len(modes)]]
