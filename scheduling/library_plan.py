"""Which groups a library call will compute, known before `register-budget`.

`tile-and-promote` chooses per GEMM and per convolution between a library
call and fusec's own kernel (`GemmChooser`, `ConvChooser`). `register-budget`
runs before it and would otherwise count with ptxas, and build ahead for the
runtime, the fused kernels of groups whose anchor becomes a cuBLAS or cuDNN
call: kernels nobody launches, and in a cold first call seconds of waiting
(GPT-2's two SIMT GEMMs, 2 s on an H100). `LibraryPlan` asks the same
choosers, with the same options, what they will choose.

Where a measurement may overrule the model's choices of a family
(`LibraryTuner.overrules`: every family under `--autotune`, convolutions
when a compile on its GPU times cuDNN's calls), nothing of that family is
planned: its groups are counted as before. GEMMs stay planned when only
convolutions are timed: planning none made a cold GPT-2 first call build
SIMT GEMM kernels that cuBLAS then ran (11 kernels built for the 7 it ran, H100).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusec.analysis.cudnn_library import cudnn_available
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.scheduling import gemm_choice
from fusec.scheduling.conv_choice import ConvChooser
from fusec.scheduling.gemm_choice import GemmChooser
from fusec.scheduling.library_tuning import active_tuner


@dataclass(frozen=True)
class LibraryPlan:
    """`tile-and-promote`'s library options (`gemm`, `library_epilogue`,
    `conv`, `conv_tf32`), for the passes before it."""

    gemm: str = "auto"
    library_epilogue: bool = True
    conv: str = "auto"
    conv_tf32: bool = False

    def library_bound(self, group: GroupOp, target: Target) -> bool:
        """Whether `tile-and-promote` will most likely give `group`'s GEMM or
        convolution to a library (False where a measurement may overrule
        the model's choice, or for a group without one)."""
        kind = getattr(group.attributes.get("kind"), "data", "")
        quiet = RemarkCollector()
        chooser: GemmChooser | ConvChooser
        if kind == "contraction":
            chooser = GemmChooser(target, self.gemm, gemm_choice.library_available(), quiet,
                                  self.library_epilogue)
        elif kind == "window":
            chooser = ConvChooser(target, self.conv, cudnn_available(), quiet, self.conv_tf32)
        else:
            return False
        tuner = active_tuner()
        if tuner is not None and tuner.overrules(chooser.family):
            return False
        return chooser.planned(group)
