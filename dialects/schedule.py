"""Schedule attributes: how one `fusion.group` runs, as data.

Each group carries ONE of these under the key `schedule`, chosen by the
`tile-and-promote` pass for the resolved target. The emitters read it
verbatim; the register model, the cost model and the report read the same
attribute (docs/scheduling.md lists every field).

```mlir
%y = fusion.group (%x) {name = "g0", kind = "reduction",
    schedule = #fusion.reduction<layout = "row", row = "registers", lanes = 128,
                                 rows_per_block = 1, splits = 1, chunk = 0,
                                 per_lane = 32, cached = 0, unroll = 4, online = 0>} ...
```

The syntax is `#fusion.<kind><key = value, ...>` with the parameters in
declaration order; values are integers or string literals. A trailing
parameter with a default (`DEFAULTS`) may be left out, and is printed only
when it differs from its default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, TypeVar

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

S = TypeVar("S", bound="ScheduleAttr")


class ScheduleAttr(ParametrizedAttribute):
    """Base of the schedule attributes: `<key = value, ...>` syntax, typed
    field access, and the choices a string field accepts."""

    name = "fusion.schedule"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}
    DEFAULTS: ClassVar[dict[str, int | str]] = {}
    """Trailing fields that may be omitted, and their values when they are."""

    @classmethod
    def field_names(cls) -> list[str]:
        """The parameter names, in order."""
        return [k for k, _ in cls.get_irdl_definition().parameters]

    @classmethod
    def make(cls: type[S], **values: int | str) -> S:
        """The attribute from plain Python values (every key without a default
        required)."""
        values = {**cls.DEFAULTS, **values}
        missing = [k for k in cls.field_names() if k not in values]
        extra = [k for k in values if k not in cls.field_names()]
        if missing or extra:
            raise ValueError(f"{cls.name}: missing {missing}, unknown {extra}")
        return cls(*(_wrap(values[k]) for k in cls.field_names()))

    def get(self, key: str) -> int | str:
        """Field `key` as an int or a str."""
        attr = getattr(self, key)
        return attr.data if isinstance(attr, (IntAttr, StringAttr)) else str(attr)

    def int_field(self, key: str) -> int:
        """An integer field."""
        value = self.get(key)
        assert isinstance(value, int)
        return value

    def str_field(self, key: str) -> str:
        """A string field."""
        value = self.get(key)
        assert isinstance(value, str)
        return value

    def as_dict(self) -> dict[str, int | str]:
        """Every field by name (plan.json, the report)."""
        return {k: self.get(k) for k in self.field_names()}

    def verify(self) -> None:
        for key, allowed in self.CHOICES.items():
            if self.get(key) not in allowed:
                raise VerifyException(f"{self.name}: {key} must be one of {', '.join(allowed)}, "
                                 f"not '{self.get(key)}'")
        for key in self.field_names():
            value = self.get(key)
            if isinstance(value, int) and value < 0:
                raise VerifyException(f"{self.name}: {key} must be >= 0, not {value}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: list[Attribute] = []
        comma = False  # a comma read before an optional field that was left out
        with parser.in_angle_brackets():
            for i, key in enumerate(cls.field_names()):
                if key in cls.DEFAULTS:
                    # left out: its default (a later optional field may follow the comma)
                    comma = comma or parser.parse_optional_punctuation(",") is not None
                    if not comma or parser.parse_optional_keyword(key) is None:
                        values.append(_wrap(cls.DEFAULTS[key]))
                        continue
                    comma = False
                else:
                    if i:
                        parser.parse_punctuation(",")
                    parser.parse_keyword(key, f" (the fields of {cls.name} are "
                                         f"{', '.join(cls.field_names())}, in that order)")
                parser.parse_punctuation("=")
                text = parser.parse_optional_str_literal()
                values.append(StringAttr(text) if text is not None
                              else IntAttr(parser.parse_integer(allow_boolean=False)))
            if comma:
                parser.raise_error(f"expected a field of {cls.name} (its fields are "
                                   f"{', '.join(cls.field_names())}, in that order)")
        return values

    def print_parameters(self, printer: Printer) -> None:
        parts = [f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}"
                 for k, v in self.as_dict().items()
                 if k not in self.DEFAULTS or v != self.DEFAULTS[k]]
        printer.print_string("<" + ", ".join(parts) + ">")


def _wrap(value: int | str) -> Attribute:
    return StringAttr(value) if isinstance(value, str) else IntAttr(value)


@irdl_attr_definition
class PointwiseSchedule(ScheduleAttr):
    """A pointwise group: `elements_per_thread` elements per thread, `block`
    apart (each warp load reads consecutive addresses), `block` threads per
    block, one block per chunk of `block * elements_per_thread` elements.
    `tile` 0 is that flat schedule; `tile = T` stages the transposed
    operands through `T x T` shared-memory tiles, one tile of outputs per
    block (`codegen/pointwise_transpose.py`). `gather_parts = P` (flat
    only) stages the table row of the group's gather along its innermost
    axis in shared memory, each row's outputs written by `P` blocks
    (`scheduling/staged_gather.py`); 0 reads the table in place."""

    name = "fusion.pointwise"
    DEFAULTS: ClassVar[dict[str, int | str]] = {"tile": 0, "gather_parts": 0}
    elements_per_thread: IntAttr
    block: IntAttr
    tile: IntAttr
    gather_parts: IntAttr


@irdl_attr_definition
class ReductionSchedule(ScheduleAttr):
    """A reduction group (`codegen/reduction.py`): `layout` row (lanes along
    the contiguous reduced axis) or column (threadIdx.x over rows); where the
    row lives between passes (`registers`, `shared`: a shared-memory cache of
    the first `cached` cache candidates, `memory`: re-read); `lanes` threads
    per row, `rows_per_block` rows per block; a row split over `splits`
    blocks of `chunk` elements (a group with a final pass over the row: two
    kernels, partial statistics then outputs; `scheduling/reduction_schedule.py`);
    `per_lane` row elements per lane held in registers; `unroll` elements
    per lane per step of a streamed pass;
    `online` 1: the max and the sum of `exp(x - max)` of a softmax share the
    first pass (`codegen/reduction_online.py`), 0: a pass each; `vector`
    row elements per access (4: quads, `codegen/reduction_vector.py`; 1 by
    default)."""

    name = "fusion.reduction"
    DEFAULTS: ClassVar[dict[str, int | str]] = {"vector": 1}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "layout": ("row", "column"), "row": ("registers", "shared", "memory")}
    layout: StringAttr
    row: StringAttr
    lanes: IntAttr
    rows_per_block: IntAttr
    splits: IntAttr
    chunk: IntAttr
    per_lane: IntAttr
    cached: IntAttr
    unroll: IntAttr
    online: IntAttr
    vector: IntAttr


@irdl_attr_definition
class ContractionSchedule(ScheduleAttr):
    """A contraction group: `impl` simt (fusec's tiled kernel: block tile
    `bm x bn`, K step `bk`, `tm x tn` outputs per thread in strips of `vec`,
    `stages` shared-memory buffers) or library (cuBLAS; the tile is unused)."""

    name = "fusion.contraction"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"impl": ("simt", "library")}
    impl: StringAttr
    bm: IntAttr
    bn: IntAttr
    bk: IntAttr
    tm: IntAttr
    tn: IntAttr
    vec: IntAttr
    stages: IntAttr


@irdl_attr_definition
class WindowSchedule(ScheduleAttr):
    """A window group: `path` pixels / general / depthwise (the tiled kernels
    of a lone conv or pool: a `th x tw` output tile of `oc_t` channels per
    block, `ci_step` input channels staged with their halo per step, `pt x
    ot` outputs per thread), conv_pool (a `th x tw` tile of pooled outputs
    per block over a shared conv tile, each conv output a direct loop) or
    direct (one output per thread, a direct loop over the taps)."""

    name = "fusion.window"
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "path": ("pixels", "general", "depthwise", "conv_pool", "direct")}
    path: StringAttr
    th: IntAttr
    tw: IntAttr
    oc_t: IntAttr
    ci_step: IntAttr
    pt: IntAttr
    ot: IntAttr


@irdl_attr_definition
class AttentionSchedule(ScheduleAttr):
    """An attention group (`codegen/attention.py`): `block_q` queries per
    block, K/V tiles of `block_k` keys, `threads` per block; `stages` 1
    (K/V staged then computed) or 2 (the next tile prefetched into
    registers while this one is computed, two shared buffers). `engine`
    simt (the default): each thread holds a `rows x cols` tile of the
    scores (`rows` consecutive queries, `cols` consecutive keys) and the
    matching `rows` output rows, in f32 FMAs; mma (`codegen/attention_mma.
    py`): each warp holds `rows = 16` queries and all `cols = block_k` keys
    of the scores, multiplied on tensor cores (`mma.sync`). `splits` (simt
    only; 1 by default): the keys are cut into `splits` chunks of whole K/V
    tiles, a block per chunk writes its partial row max, row sum and
    unnormalised outputs, and a second kernel combines them (split-KV,
    for few queries over many keys). `engine` decode (`codegen/attention_
    decode.py`): `rows = block_q <= 4` queries held by every warp, `cols`
    keys per warp step, `threads / 32 = block_k / cols` warps, lanes on
    head dims; `splits` as for simt."""

    name = "fusion.attention"
    DEFAULTS: ClassVar[dict[str, int | str]] = {"engine": "simt", "splits": 1}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"engine": ("simt", "mma", "decode")}
    block_q: IntAttr
    block_k: IntAttr
    threads: IntAttr
    rows: IntAttr
    cols: IntAttr
    stages: IntAttr
    engine: StringAttr
    splits: IntAttr

    def verify(self) -> None:
        super().verify()
        bq, bk, rows, cols = (self.int_field(k) for k in ("block_q", "block_k", "rows", "cols"))
        if self.int_field("stages") not in (1, 2):
            raise VerifyException(f"{self.name}: stages must be 1 or 2")
        if self.int_field("splits") < 1:
            raise VerifyException(f"{self.name}: splits must be >= 1")
        if self.str_field("engine") == "mma":
            if self.int_field("splits") != 1:
                raise VerifyException(f"{self.name}: an mma tile takes no splits")
            if rows != 16 or cols != bk or bq % 16 or bk % 8 or bk < 8:
                raise VerifyException(f"{self.name}: an mma tile has rows = 16, cols = block_k, "
                                      "block_q a multiple of 16 and block_k of 8")
            if self.int_field("threads") != bq * 2:
                raise VerifyException(f"{self.name}: threads must be 32 per 16 queries "
                                      f"= {bq * 2}")
            return
        if self.str_field("engine") == "decode":
            self._verify_decode(bq, bk, rows, cols)
            return
        if min(bq, bk, rows, cols) < 1 or bq % rows or bk % cols:
            raise VerifyException(f"{self.name}: rows must divide block_q and cols block_k")
        lanes = bk // cols
        if lanes & (lanes - 1) or lanes > 32:
            raise VerifyException(f"{self.name}: block_k / cols = {lanes} threads per row "
                                  "group must be a power of two <= 32")
        if self.int_field("threads") != bq // rows * lanes:
            raise VerifyException(f"{self.name}: threads must be (block_q / rows) * "
                                  f"(block_k / cols) = {bq // rows * lanes}")

    def _verify_decode(self, bq: int, bk: int, rows: int, cols: int) -> None:
        if not 1 <= rows <= 4 or bq != rows or cols < 1 or bk % cols:
            raise VerifyException(f"{self.name}: a decode tile has block_q = rows <= 4 and "
                                  "cols dividing block_k")
        if self.int_field("stages") != 1 or self.int_field("threads") != bk // cols * 32:
            raise VerifyException(f"{self.name}: a decode tile has one stage and threads = "
                                  f"32 * block_k / cols = {bk // cols * 32}")


SCHEDULE_ATTRS: tuple[type[ScheduleAttr], ...] = (
    PointwiseSchedule, ReductionSchedule, ContractionSchedule, WindowSchedule,
    AttentionSchedule)
"""The schedule attribute of each group kind (registered by the fusion dialect)."""

SCHEDULE_KEY = "schedule"
"""The group attribute holding the schedule."""
