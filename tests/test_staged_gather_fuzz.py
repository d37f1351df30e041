"""Random programs around a gather staged by rows (`scheduling/staged_gather.py`,
`codegen/gather_rows.py`, `codegen/pointwise_transpose.py`).

A seeded generator writes `nn.gather %tab, %ids {axis = rank - 1}` with
pointwise neighbours: tables of rank 2-4 whose rows are 1 to 129 elements
(odd, prime, powers of two), ids of rank 1-3 (i32 or i64, negative ones and
both ends of the row), tables of f32, bf16, f16 (never staged: no f16
shared array), f64, i32 and i64 (staged element by element); before the
gather an op on another input, after it an add of a `[*ids]` tensor
broadcast over the rows, a product with a per-row `[R..., 1...]` operand,
a scalar constant, several results (the gather's own, `x * 2`, `x + 1`, a
cast to another type), sometimes ids computed before the gather. Each
program compiles through the default pipeline for the H200
(`generate_program`'s default target, the one the pipeline is given here),
runs in numba's CUDA simulator and is compared with the reference
interpreter: one launch (two where the ids are computed: a gather reads in
place only what comes from memory), the row staged exactly when
`staged_gather.find` / `parts` say so on the H200 (with the grid and shared
bytes they imply), and the numbers within the bound of the least precise
type an output went through (integers exact).

The simulator runs every thread of a 512-thread staged block in Python, so
each program's simulated threads are capped (`DEFAULT_THREADS`); the wider
seed range and the boundary of a block's shared memory are `slow`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import codegen_harness as harness
import numpy as np
import pytest

from fusec.analysis.targets import H200
from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry
from fusec.dialects.element_types import bf16_bits, bf16_values, element
from fusec.reference.interpreter import run_module
from fusec.reference.ops import round_to_bf16
from fusec.runtime.executor import run_program
from fusec.scheduling import staged_gather
from fusec.scheduling.pointwise import STAGED_GATHER_THREADS

PIPELINE = default_pipeline(make_registry([]), PipelineOptions(target="h200"))
TARGET = H200
"""The target `harness.compile_text` generates for (`generate_program`'s
default, `DEFAULT_TARGET`) and the pipeline schedules for."""

TABLE_TYPES = ("f32", "bf16", "f16", "f64", "i32", "i64")
TOLERANCE = {"f64": 1e-12, "f32": 2e-6, "f16": 2e-3, "bf16": 1e-2}
"""Bound of an output computed through this float type, relative to the
output's largest magnitude: the reference computes in float64 and rounds
only at a cast, a kernel computes in f32 (f64) and rounds what it stores."""
CASTS = {"f32": ("bf16", "f16", "f64"), "bf16": ("f16",), "f16": ("bf16",), "f64": ("f32",),
         "i32": ("f32", "i64"), "i64": ("f64", "f32")}
"""Types a result may be cast to, per table type. A half value is not
widened to f32 in the kernel that computes it (form-fusion-groups counts
its skipped rounding against f32's tau), so halves cast to halves."""
ROW_LENGTHS = (1, 2, 3, 7, 8, 31, 37, 64, 129)
IDS_INNER = (1, 3, 4, 5, 7, 8, 12, 16, 24, 31, 32, 37, 40, 64)
"""Innermost ids extents: multiples of 4 or 8 (wide stores) and not."""
OUTER_EXTENTS = (1, 2, 3, 4, 5)
DEFAULT_THREADS = 3 * STAGED_GATHER_THREADS
"""Simulated threads per program in the default run (about 0.5 s a block)."""
SLOW_THREADS = 8 * STAGED_GATHER_THREADS
DEFAULT_SEEDS = range(8)
SLOW_SEEDS = (*range(8, 32), *range(1000, 1036))


@dataclass
class Case:
    """One generated program and what it is checked against."""

    text: str
    table: tuple[int, ...]
    ids: tuple[int, ...]
    dtype: str
    itype: str
    extra: list[tuple[str, tuple[int, ...]]]
    """The inputs after `%tab, %ids`: (name, shape), all of the table's type."""
    results: list[tuple[str, str]] = field(default_factory=list)
    """Per result: its type and the least precise float type it went through
    ("" for an integer result)."""
    pointwise: bool = True
    """Whether the group holds an elementwise op (a lone gather is a layout
    group, never staged)."""
    ids_shift: int = 0
    """What the program subtracts from `%ids` before the gather (the ids
    passed in are the row's, plus this)."""
    launches: int = 1
    """One, and one more for an op on the ids: a gather reads in place only
    what a kernel reads from memory (form-fusion-groups leaves computed ids
    to a kernel of their own)."""

    @property
    def out(self) -> tuple[int, ...]:
        return (*self.table[:-1], *self.ids)

    def predicted(self) -> tuple[staged_gather.StagedGather, int]:
        """The gather's sizes and the blocks per row `parts` gives on the
        target (0: read in place), as `find` would see the group."""
        found = staged_gather.StagedGather(
            None, None, rows=int(np.prod(self.table[:-1])), row=self.table[-1],  # type: ignore[arg-type]
            per_row=int(np.prod(self.ids)), item=item(self.dtype))
        device_dtype = element(self.dtype).device_dtype
        if not self.pointwise or device_dtype not in staged_gather.STAGED_DTYPES:
            return found, 0  # f16: no shared array of it
        out_item = max(item(t) for t, _ in self.results)
        return found, staged_gather.parts(found, out_item, TARGET)

    def threads(self) -> int:
        """Threads the simulator runs for this program (an estimate where
        the row is read in place)."""
        found, parts = self.predicted()
        if parts:
            return found.rows * parts * STAGED_GATHER_THREADS
        half = self.dtype in ("bf16", "f16") or any(t in ("bf16", "f16") for t, _ in self.results)
        per_block = 256 * (8 if half else 4)
        return -(-int(np.prod(self.out)) // per_block) * 256


def tensor(shape: tuple[int, ...], dtype: str) -> str:
    return harness.tensor(shape, dtype)


def item(dtype: str) -> int:
    """Bytes per element (bf16 as its uint16 bits)."""
    return element(dtype).width


def is_float(dtype: str) -> bool:
    return element(dtype).is_float


def literal(dtype: str, value: float) -> str:
    return f"dense<{value}>" if is_float(dtype) else f"dense<{int(value)}>"


def least_precise(*types: str) -> str:
    floats = [t for t in types if t in TOLERANCE]
    return max(floats, key=lambda t: TOLERANCE[t]) if floats else ""


@dataclass
class Writer:
    """The lines of a program around `%g = nn.gather %tab, ...` as they are
    drawn: `head` before the gather, `body` after it, the results."""

    case: Case
    head: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    results: list[tuple[str, str, str]] = field(default_factory=list)
    """(SSA name, type, element type) of each result."""
    gathered: str = "%ids"
    """What the gather reads: the ids input or an op on it."""

    def types(self) -> tuple[str, str, str]:
        """The result, table and ids types, and the scalar of the table's."""
        c = self.case
        return tensor(c.out, c.dtype), tensor(c.ids, c.itype), tensor((), c.dtype)

    def ids_op(self, rng: np.random.Generator) -> str:
        """Maybe an op on the ids (a kernel of its own); their type after it."""
        c = self.case
        ti = tensor(c.ids, c.itype)
        op = rng.choice(["", "", "", "shift", "widen"])
        if op == "shift":  # the row's ids are those passed in, less one
            one = tensor((), c.itype)
            self.head += [f"  %ki = nn.constant dense<1> : {one}",
                          f"  %ids1 = nn.sub %ids, %ki : ({ti}, {one}) -> {ti}"]
            c.ids_shift, c.launches, self.gathered = 1, 2, "%ids1"
        elif op == "widen" and c.itype == "i32":
            ti = tensor(c.ids, "i64")
            self.head.append(f"  %ids1 = nn.cast %ids : ({tensor(c.ids, c.itype)}) -> {ti}")
            c.launches, self.gathered = 2, "%ids1"
        return ti

    def neighbours(self, rng: np.random.Generator) -> str:
        """The elementwise ops after the gather (some reading an op before
        it); the value they leave."""
        c = self.case
        to, _, scalar = self.types()
        x = "%g"
        if rng.random() < 0.5:  # over the rows, as `[*ids]` or with some leading ones
            b_shape = (*(1,) * int(rng.integers(0, len(c.table))), *c.ids)
            tb, b = tensor(b_shape, c.dtype), "%b"
            c.extra.append(("b", b_shape))
            if rng.random() < 0.5:  # a pointwise op on another input before the gather
                k = literal(c.dtype, 0.5 if is_float(c.dtype) else 3)
                self.head += [f"  %kb = nn.constant {k} : {scalar}",
                              f"  %bq = nn.mul %b, %kb : ({tb}, {scalar}) -> {tb}"]
                b = "%bq"
            self.body.append(f"  %xb = nn.add {x}, {b} : ({to}, {tb}) -> {to}")
            x = "%xb"
        if rng.random() < 0.4:  # one value per row
            per_row = (*c.table[:-1], *(1,) * len(c.ids))
            c.extra.append(("p", per_row))
            self.body.append(f"  %xp = nn.mul {x}, %p : ({to}, {tensor(per_row, c.dtype)}) -> {to}")
            x = "%xp"
        if rng.random() < 0.5:
            op = str(rng.choice(["mul", "add", "sub"]))
            value = float(rng.choice([1.25, -0.75, 3.0] if is_float(c.dtype) else [3, -2, 5]))
            self.body += [f"  %ks = nn.constant {literal(c.dtype, value)} : {scalar}",
                          f"  %xs = nn.{op} {x}, %ks : ({to}, {scalar}) -> {to}"]
            x = "%xs"
        return x

    def result_ops(self, x: str, rng: np.random.Generator) -> None:
        """Some of `x`, the gather's own result, `x * 2`, `x + 1` and a cast
        of `x`, at least one computed by an elementwise op, in random order."""
        c = self.case
        to, _, scalar = self.types()
        wanted = [w for w in ("x", "g", "x2", "x1", "cast") if rng.random() < 0.45]
        if x == "%g":
            wanted = [w for w in wanted if w != "x"]
        if not {"x", "x2", "x1", "cast"} & set(wanted):
            wanted.append("x" if x != "%g" else str(rng.choice(["x2", "x1", "cast"])))
        for w in wanted:
            if w in ("x", "g"):
                self.results.append((x if w == "x" else "%g", to, c.dtype))
            elif w in ("x2", "x1"):
                value, op = (2, "mul") if w == "x2" else (1, "add")
                self.body += [f"  %k{w} = nn.constant {literal(c.dtype, value)} : {scalar}",
                              f"  %{w} = nn.{op} {x}, %k{w} : ({to}, {scalar}) -> {to}"]
                self.results.append((f"%{w}", to, c.dtype))
            else:
                target = str(rng.choice(CASTS[c.dtype]))
                tc = tensor(c.out, target)
                self.body.append(f"  %xc = nn.cast {x} : ({to}) -> {tc}")
                self.results.append(("%xc", tc, target))
        self.results = [self.results[i] for i in rng.permutation(len(self.results))]

    def text(self, tg: str) -> str:
        """The function, its gather reading ids of type `tg`."""
        c = self.case
        to, ti, _ = self.types()
        tt = tensor(c.table, c.dtype)
        args = [f"%tab: {tt}", f"%ids: {ti}",
                *(f"%{name}: {tensor(shape, c.dtype)}" for name, shape in c.extra)]
        types = ", ".join(r[1] for r in self.results)
        return "".join([
            f"func.func @f({', '.join(args)}) -> ({types}) {{\n",
            *(line + "\n" for line in self.head),
            f"  %g = nn.gather %tab, {self.gathered} {{axis = {len(c.table) - 1}}} "
            f": ({tt}, {tg}) -> {to}\n",
            *(line + "\n" for line in self.body),
            f"  func.return {', '.join(r[0] for r in self.results)} : {types}\n}}\n"])


def build(table: tuple[int, ...], ids: tuple[int, ...], dtype: str, itype: str,
          rng: np.random.Generator, *, lone: bool = False) -> Case:
    """A program gathering `ids` from `table` along its last axis, with
    neighbours drawn from `rng` (`lone`: the gather alone)."""
    case = Case("", table, ids, dtype, itype, [])
    w = Writer(case)
    tg = tensor(ids, itype)
    if lone:
        case.pointwise = False
        w.results.append(("%g", tensor(case.out, dtype), dtype))
    else:
        tg = w.ids_op(rng)
        w.result_ops(w.neighbours(rng), rng)
    case.text = w.text(tg)
    case.results = [(r[2], least_precise(dtype, r[2])) for r in w.results]
    return case


def draw_shapes(rng: np.random.Generator, dtype: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A table and an ids shape: few rows, and ids often near the count at
    which staging starts to pay (`row * item <= ids * 16`)."""
    rank = int(rng.integers(2, 5))
    while True:
        outer = tuple(int(rng.choice(OUTER_EXTENTS[:4 if rank > 2 else 5]))
                      for _ in range(rank - 1))
        if np.prod(outer) <= 6:
            break
    row = int(rng.choice(ROW_LENGTHS))
    ids_rank = int(rng.integers(1, 4))
    threshold = -(-row * item(dtype) // staged_gather.PAYS_SECTOR_BYTES)
    if rng.random() < 0.25:  # at the boundary: exactly enough ids, or one fewer
        total = max(1, threshold - int(rng.integers(0, 2)))
        inner = total
        lead: list[int] = []
        for _ in range(ids_rank - 1):  # split off a small factor where one divides
            f = next((f for f in (2, 3) if inner % f == 0 and inner > f), 1)
            lead.append(f)
            inner //= f
        return (*outer, row), (*lead, inner)
    inner = int(rng.choice(IDS_INNER))
    lead = [int(rng.choice((1, 2, 3))) for _ in range(ids_rank - 1)]
    return (*outer, row), (*lead, inner)


def generate(seed: int, budget: int) -> Case:
    """The program of `seed`, redrawn until it runs at most `budget`
    simulated threads: read in place, staged by one block per row or by
    several, drawn in turn (the cheap ones read in place would be most
    otherwise)."""
    rng = np.random.default_rng(seed)
    dtype = str(rng.choice([*TABLE_TYPES, "f32", "bf16"]))  # f32 and bf16 twice as often
    itype = str(rng.choice(["i32", "i64"]))
    lone = rng.random() < 0.05
    blocks = int(rng.choice([0, 1, 1, 2])) if dtype != "f16" and not lone else 0
    while True:
        table, ids = draw_shapes(rng, dtype)
        case = build(table, ids, dtype, itype, rng, lone=lone)
        if case.threads() <= budget and min(case.predicted()[1], 2) == blocks:
            return case


def ids_for(shape: tuple[int, ...], row: int, rng: np.random.Generator, itype: str) -> np.ndarray:
    """Ids over the whole row, some negative (from the end), the first
    ones at both ends."""
    ids = rng.integers(-row, row, size=shape)
    flat = ids.reshape(-1)
    ends = [row - 1, -row, 0, -1][: flat.size]
    flat[: len(ends)] = ends
    return ids.astype(np.int64 if itype == "i64" else np.int32)


def values(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Random values of `dtype` (bf16 as float32 holding bf16 values; i64
    past 32 bits, so a narrowed copy shows)."""
    if dtype == "i32":
        return rng.integers(-1000, 1000, size=shape).astype(np.int32)
    if dtype == "i64":
        return rng.integers(-(1 << 40), 1 << 40, size=shape).astype(np.int64)
    x = rng.standard_normal(shape)
    if dtype == "bf16":
        return round_to_bf16(x.astype(np.float32))
    return x.astype({"f32": np.float32, "f16": np.float16, "f64": np.float64}[dtype])


def check(case: Case, seed: int) -> None:
    """Compile, run in the simulator and compare (module docstring)."""
    program = harness.compile_text(case.text, PIPELINE)
    source = program.kernels_source
    context = f"\n{case.text}\n{source}"
    launches = program.functions["f"].launches
    assert len(launches) == case.launches, f"{len(launches)} launches{context}"
    found, parts = case.predicted()
    staged = "srow = cuda.shared.array(0" in source
    assert staged == bool(parts), f"staged {staged}, predicted parts {parts}{context}"
    if parts:
        launch = launches[-1]  # after the ids' kernel, if any
        assert tuple(launch.grid) == (found.rows, parts, 1), f"grid {launch.grid}{context}"
        assert launch.shared_bytes == found.shared_bytes, context
    rng = np.random.default_rng(seed + 7919)
    inputs = [values(case.table, case.dtype, rng),
              ids_for(case.ids, case.table[-1], rng, case.itype) + case.ids_shift]
    inputs += [values(shape, case.dtype, rng) for _, shape in case.extra]
    reference = harness.parse_module(harness.make_context(), case.text, "fuzz.mlir")
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    assert len(got) == len(expected) == len(case.results)
    for k, (e, g, (dtype, through)) in enumerate(zip(expected, got, case.results, strict=True)):
        g = np.asarray(g)
        assert g.shape == e.shape == case.out, context
        if not through:  # integers: exact
            np.testing.assert_array_equal(g, e, err_msg=f"result {k} ({dtype}){context}")
            continue
        tol = TOLERANCE[through]
        scale = max(1.0, float(np.abs(e.astype(np.float64)).max()))
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=tol,
                                   atol=tol * scale, err_msg=f"result {k} ({dtype}){context}")


@pytest.fixture(autouse=True)
def _estimates_only(no_ptxas_probe: None) -> None:
    """register-budget decides by its estimate alone: these tests read
    kernels and numbers, not register counts."""


@pytest.mark.parametrize("seed", DEFAULT_SEEDS)
def test_random_staged_gather_program(seed: int) -> None:
    check(generate(seed, DEFAULT_THREADS), seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_random_staged_gather_program_more_seeds(seed: int) -> None:
    check(generate(seed, SLOW_THREADS), seed)


def fixed(table: tuple[int, ...], ids: tuple[int, ...], dtype: str, seed: int = 0,
          itype: str = "i64", lone: bool = False) -> Case:
    return build(table, ids, dtype, itype, np.random.default_rng(seed), lone=lone)


@pytest.mark.parametrize(("table", "ids", "dtype"), [
    ((2, 64), (16,), "f32"),  # 256 row bytes, 16 ids: staging just pays
    ((2, 64), (15,), "f32"),  # one id fewer: read in place
    ((1, 129), (3, 11), "bf16"),  # 258 row bytes, 33 ids: staged
    ((1, 129), (2, 2, 4), "bf16"),  # 16 ids: read in place
    ((3, 37), (40,), "f16"),  # f16 rows are never staged
    ((2, 1, 8), (4,), "f64"),  # 64 row bytes, 4 ids
    ((3, 7), (2, 4), "i32"),
    ((2, 31), (16,), "i64"),
])
def test_the_staging_boundary(table: tuple[int, ...], ids: tuple[int, ...], dtype: str) -> None:
    check(fixed(table, ids, dtype, seed=len(ids)), 11)


def test_a_lone_gather_is_a_layout_kernel_read_in_place() -> None:
    """Nothing elementwise: a layout group, not the pointwise one whose
    gather `staged_gather` stages, though its sizes would pay."""
    case = fixed((3, 37), (40,), "f32", lone=True)
    found, parts = case.predicted()
    assert parts == 0 and staged_gather.parts(found, 4, TARGET) == 1
    check(case, 5)


@pytest.mark.slow
@pytest.mark.parametrize(("row", "dtype"), [
    (TARGET.shared_memory_per_block // 4, "f32"),  # the row fills a block's shared memory
    (TARGET.shared_memory_per_block // 4 + 1, "f32"),  # one element more: read in place
])
def test_a_row_at_the_shared_memory_limit(row: int, dtype: str) -> None:
    ids = (-(-row * item(dtype) // staged_gather.PAYS_SECTOR_BYTES),)
    check(fixed((1, row), ids, dtype, seed=3), 13)


def test_the_generator_reaches_the_boundaries() -> None:
    """The default seeds stage and read in place, cover every table type,
    both id types and wide and narrow innermost ids."""
    cases = [generate(s, DEFAULT_THREADS) for s in DEFAULT_SEEDS]
    assert {min(c.predicted()[1], 2) for c in cases} == {0, 1, 2}
    assert {c.itype for c in cases} == {"i32", "i64"}
    assert {c.ids[-1] % 4 == 0 for c in cases} == {True, False}
    slow = [generate(s, SLOW_THREADS) for s in SLOW_SEEDS]
    assert {c.dtype for c in slow} == set(TABLE_TYPES)
    assert {len(c.table) for c in slow} == {2, 3, 4}
    assert {len(c.ids) for c in slow} == {1, 2, 3}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_a_table_off_a_16_byte_boundary_is_staged_from_a_copy(dtype: str) -> None:
    """A caller's table view that starts one element into its buffer: the
    runtime copies it before the kernel stages rows in 16-byte words (the
    simulator, like the GPU, faults on a misaligned word)."""
    table, ids = (2, 37), (2, 20)  # row 1 starts off a word: staged element by element
    out = (2, *ids)
    t = tensor
    text = (f"func.func @f(%tab: {t(table, dtype)}, %ids: {t(ids, 'i32')}) -> {t(out, dtype)} {{\n"
            f"  %g = nn.gather %tab, %ids {{axis = 1}} : ({t(table, dtype)}, {t(ids, 'i32')}) "
            f"-> {t(out, dtype)}\n"
            f"  %k = nn.constant dense<1.5> : {t((), dtype)}\n"
            f"  %r = nn.mul %g, %k : ({t(out, dtype)}, {t((), dtype)}) -> {t(out, dtype)}\n"
            f"  func.return %r : {t(out, dtype)}\n}}\n")
    program = harness.compile_text(text, PIPELINE)
    assert "srow = cuda.shared.array(0" in program.kernels_source
    rng = np.random.default_rng(2)
    host = [values(table, dtype, rng), ids_for(ids, table[-1], rng, "i32")]
    expected = run_module(harness.parse_module(harness.make_context(), text, "t.mlir"), host, "f")
    (aligned,) = run_program(program, "f", host, device="sim")
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(aligned, expected[0], rtol=tol, atol=tol,
                               err_msg=program.kernels_source)
    device = [harness.one_element_in(bf16_bits(host[0]) if dtype == "bf16" else host[0]),
              harness.one_element_in(host[1])]
    (got,) = run_program(program, "f", device, device="sim")
    got = np.asarray(got.copy_to_host())  # bf16: the bits
    np.testing.assert_array_equal(bf16_values(got) if dtype == "bf16" else got, aligned)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_a_gathered_half_value_widened_to_f32_is_one_staged_kernel(dtype: str) -> None:
    """The gather's result kept in registers skips no rounding (it is the
    table's elements moved): fusion legality once counted it as a skipped
    half rounding and left the cast in a kernel of its own."""
    table, ids = (3, 37), (40,)
    out = (3, *ids)
    t = tensor
    text = (f"func.func @f(%tab: {t(table, dtype)}, %ids: {t(ids, 'i64')}) -> {t(out, 'f32')} {{\n"
            f"  %g = nn.gather %tab, %ids {{axis = 1}} : ({t(table, dtype)}, {t(ids, 'i64')}) "
            f"-> {t(out, dtype)}\n"
            f"  %c = nn.cast %g : ({t(out, dtype)}) -> {t(out, 'f32')}\n"
            f"  func.return %c : {t(out, 'f32')}\n}}\n")
    case = Case(text, table, ids, dtype, "i64", [], [("f32", dtype)])
    check(case, 17)  # bf16: staged, 2 blocks per row; f16: read in place
