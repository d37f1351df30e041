"""fusec's own passes by name, each a function that imports its pass when
called: no pass is imported at start-up (`fusec --help` stays fast), and
`lint-imports` sees every one of these imports, as it would not see a
`"module:Class"` string handed to importlib. The file of each pass is its
name in snake_case."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass

PassFactory = Callable[[], type[ModulePass]]
"""Returns a pass class; called when the pass is first used."""


def _check_precision() -> type[ModulePass]:
    from fusec.passes.check_precision import CheckPrecisionPass

    return CheckPrecisionPass


def _decompose() -> type[ModulePass]:
    from fusec.passes.decompose import DecomposePass

    return DecomposePass


def _dependency_analysis() -> type[ModulePass]:
    from fusec.passes.dependency_analysis import DependencyAnalysisPass

    return DependencyAnalysisPass


def _fold_constants() -> type[ModulePass]:
    from fusec.passes.fold_constants import FoldConstantsPass

    return FoldConstantsPass


def _fuse_attention() -> type[ModulePass]:
    from fusec.passes.fuse_attention import FuseAttentionPass

    return FuseAttentionPass


def _fold_empty() -> type[ModulePass]:
    from fusec.passes.fold_empty import FoldEmptyPass

    return FoldEmptyPass


def _form_fusion_groups() -> type[ModulePass]:
    from fusec.passes.form_fusion_groups import FormFusionGroupsPass

    return FormFusionGroupsPass


def _group_each_op() -> type[ModulePass]:
    from fusec.passes.group_each_op import GroupEachOpPass

    return GroupEachOpPass


def _lower_to_numba() -> type[ModulePass]:
    from fusec.passes.lower_to_numba import LowerToNumbaPass

    return LowerToNumbaPass


def _register_budget() -> type[ModulePass]:
    from fusec.passes.register_budget import RegisterBudgetPass

    return RegisterBudgetPass


def _channels_last() -> type[ModulePass]:
    from fusec.passes.channels_last import ChannelsLastPass

    return ChannelsLastPass


def _sink_transposes() -> type[ModulePass]:
    from fusec.passes.sink_transposes import SinkTransposesPass

    return SinkTransposesPass


def _tile_and_promote() -> type[ModulePass]:
    from fusec.passes.tile_and_promote import TileAndPromotePass

    return TileAndPromotePass


def _unmerge_broadcasts() -> type[ModulePass]:
    from fusec.passes.unmerge_broadcasts import UnmergeBroadcastsPass

    return UnmergeBroadcastsPass


BUILTIN_PASSES: dict[str, PassFactory] = {
    "channels-last": _channels_last,
    "check-precision": _check_precision,
    "decompose": _decompose,
    "dependency-analysis": _dependency_analysis,
    "fold-constants": _fold_constants,
    "fuse-attention": _fuse_attention,
    "fold-empty": _fold_empty,
    "form-fusion-groups": _form_fusion_groups,
    "group-each-op": _group_each_op,
    "lower-to-numba": _lower_to_numba,
    "register-budget": _register_budget,
    "sink-transposes": _sink_transposes,
    "tile-and-promote": _tile_and_promote,
    "unmerge-broadcasts": _unmerge_broadcasts,
}
"""Every built-in pass: its name (as in a pipeline) and its factory."""
