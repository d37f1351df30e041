"""The plan of an attention group (`AttentionPlan`): the pattern the group
computes (`scheduling/attention_group.find_pattern`: Q·Kᵀ, the score
function, the softmax, ·V), its sizes, the tile its recorded
`#fusion.attention` schedule names (checked against the group and the
target), the grid's query tiles and the shared memory the tile takes, static
or dynamic. The attention writers (`codegen/attention.py` and the mma,
decode and split writers beside it) read it and decide nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusec.analysis.attention_pattern import AttentionPattern
from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.scheduling.attention_decode_schedule import decode_head_problem
from fusec.scheduling.attention_group import AttentionSizes, checked_tile, find_pattern
from fusec.scheduling.attention_mma_schedule import mma_problem
from fusec.scheduling.attention_schedule import AttentionTile, shared_bytes


@dataclass(frozen=True)
class AttentionPlan:
    """Every decision behind one attention group's kernel(s)."""

    body: GroupBody
    pattern: AttentionPattern
    sizes: AttentionSizes
    tile: AttentionTile
    qtiles: int
    """Query tiles per batch entry (the grid is batch x qtiles blocks)."""
    shared_bytes: int
    """The shared memory the tile takes per block."""
    dynamic: bool
    """Whether that memory is over the target's static limit (then requested
    at launch)."""


def plan_attention(group: GroupOp, body: GroupOp, target: Target) -> AttentionPlan:
    """The plan of attention `group`, whose (decomposed) body is `body`, under
    its recorded schedule for `target`; a tile whose engine cannot take the
    head sizes is an error at the group."""
    flat = GroupBody.of(body)
    pattern = find_pattern(flat)
    sizes = AttentionSizes.of(pattern)
    tile = checked_tile(group, target)
    if tile.engine == "mma":
        problem = mma_problem(sizes.d, sizes.dv, sizes.element)
    elif tile.engine == "decode":
        problem = decode_head_problem(sizes.d, sizes.dv)
    else:
        problem = None
    if problem is not None:
        raise op_error(group, f"attention tile {tile.text()} cannot take {problem}")
    smem = shared_bytes(tile, sizes.d, sizes.dv, sizes.element)
    return AttentionPlan(flat, pattern, sizes, tile, -(-sizes.s // tile.block_q), smem,
                         smem > target.static_shared_limit)
