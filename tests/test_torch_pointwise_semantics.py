"""PyTorch's meaning of elementwise ops on Booleans, integers and Python
numbers, through `torch.compile(backend="fusec")` in the simulator; and a
node whose translation fusec's verifier rejects runs in PyTorch, never
failing the whole compile."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")  # bf16 values in translation (docs/pytorch.md)

from fusec.importers.onnx.emit import Val  # noqa: E402
from fusec.importers.torch import Backend, op_table  # noqa: E402
from fusec.importers.torch.context import OpCtx  # noqa: E402
from fusec.importers.torch.translate import node_at  # noqa: E402

aten = torch.ops.aten
F = torch.nn.functional


def _run(fn: Callable[..., torch.Tensor], *inputs: torch.Tensor
         ) -> tuple[torch.Tensor, Backend]:
    torch._dynamo.reset()
    backend = Backend()
    with torch.no_grad():
        out = torch.compile(fn, backend=backend)(*inputs)
    return out, backend


BOOLEAN: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mul": lambda m, n: m * n,
    "add": lambda m, n: m + n,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "mul_number": lambda m, n: (m * True) & n,
}


@pytest.mark.parametrize("name", list(BOOLEAN))
def test_boolean_arithmetic_is_logic_in_fusec(name: str) -> None:
    """Masks combined with `*`, `+`, max and min (and, or, or, and) compile
    in fusec; `nn.mul` and `nn.add` take no i1 elements."""
    torch.manual_seed(sum(map(ord, name)))
    m, n = torch.rand(5, 7) > 0.5, torch.rand(1, 7) > 0.5
    out, backend = _run(BOOLEAN[name], m, n)
    (report,) = backend.reports
    assert report.fallback_nodes == [], report.remarks
    assert out.dtype == torch.bool
    assert torch.equal(out, BOOLEAN[name](m, n))


def test_integer_power_runs_in_pytorch_with_a_reason() -> None:
    i = torch.randint(-4, 5, (3, 4))
    out, backend = _run(lambda t: t ** 2 + 1, i)
    (report,) = backend.reports
    assert report.fallback_nodes == ["pow_1"]
    assert "integer powers are not supported" in report.fallbacks["pow_1"].reason
    assert torch.equal(out, i ** 2 + 1)


def test_clamp_with_min_above_max_gives_max_as_pytorch() -> None:
    x = torch.randn(4, 5)
    out, backend = _run(lambda t: t.clamp(0.5, -0.5), x)
    assert backend.reports[0].fallback_nodes == []
    assert torch.equal(out, x.clamp(0.5, -0.5))


HALF_NUMBERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "divide_by_1e5": lambda x: x / 100000.0,  # inf as an f16
    "scale_by_1.001": lambda x: x * 1.001 - x,  # 1.0 as a bf16
    "scale_by_0.1": lambda x: x * 0.1,
    "alpha": lambda x: torch.add(x, x, alpha=0.3),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", list(HALF_NUMBERS))
def test_a_half_op_keeps_its_python_number_in_f32(name: str, dtype: torch.dtype) -> None:
    """PyTorch computes `half_tensor op number` in f32 and rounds the result
    once: the number is not rounded to the half type first (which made
    `x / 1e5` zero in f16)."""
    torch.manual_seed(7)
    x = (torch.rand(4, 64) + 0.5).to(dtype)
    fn = HALF_NUMBERS[name]
    out, backend = _run(fn, x)
    assert backend.reports[0].fallback_nodes == []
    want = fn(x).float().numpy()
    got = out.float().numpy()
    ulp = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7  # one rounding of the result
    np.testing.assert_allclose(got, want, rtol=2 * ulp, atol=0)


def test_a_number_compared_with_a_half_tensor_is_rounded_first() -> None:
    """Comparisons round the number to the tensor's type, as PyTorch does:
    an f16 0.1 is `>= 0.1`."""
    x = torch.full((3, 8), 0.1).half()
    out, _ = _run(lambda t: t >= 0.1, x)
    assert bool(out.all()) and bool((x >= 0.1).all())


def _bad_neg(ctx: OpCtx) -> Val:
    """A translation the verifier rejects: `nn.exp` of an integer tensor."""
    return ctx.em.unary("exp", ctx.tensor("self"), ctx.hint)


def test_a_node_whose_translation_fails_to_verify_runs_in_pytorch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rest of the graph still compiles in fusec, and the remark gives
    the verifier's reason."""
    monkeypatch.setitem(op_table.TRANSLATORS, aten.neg.default, _bad_neg)
    i = torch.randint(-4, 5, (3, 4))
    x = torch.randn(3, 4)

    def fn(i: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * (-i).float() + 1.0

    out, backend = _run(fn, i, x)
    (report,) = backend.reports
    assert report.fallback_nodes == ["neg"]
    assert "fusec rejected its translation" in report.fallbacks["neg"].reason
    assert "'nn.exp' op operand #0 must have floating-point elements" in (
        report.fallbacks["neg"].reason)
    assert report.fusec_partitions
    np.testing.assert_allclose(out.numpy(), fn(i, x).numpy(), rtol=1e-5, atol=1e-6)


def test_node_at_finds_the_node_of_a_line() -> None:
    text = "func.func @f(%a: tensor<2xf32>) {\n  // add_1: aten.add.Tensor (m.py:3)\n" \
           "  %add_1 = nn.add %a, %a : (...)\n  // mul: aten.mul.Tensor\n  %m = nn.mul\n}"
    assert node_at(text, 1) is None
    assert node_at(text, 3) == "add_1"
    assert node_at(text, 5) == "mul"


def test_a_node_the_scan_translates_but_its_partition_does_not_runs_in_pytorch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A translation that succeeds when the graph is scanned and fails in
    its partition (an operand's value known to the scan only) falls back
    with its reason instead of failing `torch.compile`."""
    calls = {"n": 0}
    neg = op_table.TRANSLATORS[aten.neg.default]

    def flaky(ctx: OpCtx) -> Val:
        calls["n"] += 1
        if calls["n"] > 1:
            raise ctx.fail("not inside a partition")
        return neg(ctx)

    monkeypatch.setitem(op_table.TRANSLATORS, aten.neg.default, flaky)
    x = torch.randn(3, 4)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(-torch.exp(x)) + 1.0

    out, backend = _run(fn, x)
    (report,) = backend.reports
    assert report.fallback_nodes == ["neg"]
    assert report.fallbacks["neg"].reason == "not inside a partition"
    np.testing.assert_allclose(out.numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-6)


EDGES = [0.0, -0.0, 1e-10, -1e-10, 3e-8, 1e-4, -1e-4, 0.5, -0.7, 5.0, 88.0, 100.0, -100.0,
         -1.0, -2.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("op", ["expm1", "log1p", "sign"])
def test_expm1_log1p_and_sign_as_pytorch_near_zero_and_at_the_edges(op: str) -> None:
    """Full f32 precision where `exp(x) - 1` and `log(1 + x)` lose it (tiny
    x), the infinities and NaN, and `sign` of NaN and zeros (0)."""
    fn = getattr(torch, op)
    x = torch.tensor(EDGES, dtype=torch.float32)
    out, backend = _run(lambda t: fn(t * 1.0), x)
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    want = fn(x)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=4e-7, atol=0)
    torch.manual_seed(11)
    y = torch.randn(64) * 3.0
    out, _ = _run(lambda t: fn(t * 1.0), y)
    np.testing.assert_allclose(out.numpy(), fn(y).numpy(), rtol=4e-7, atol=0)


def test_softplus_elu_and_mish_leave_nothing_to_pytorch_in_bf16() -> None:
    torch.manual_seed(12)
    x = (torch.randn(4, 32) * 3).to(torch.bfloat16)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return F.softplus(t) + F.elu(t) + F.mish(t)

    out, backend = _run(fn, x)
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    want = fn(x).float()
    bound = 4e-2 * float(want.abs().max())
    assert float((out.float() - want).abs().max()) <= bound


INTEGER_REDUCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "count_a_mask": lambda x, i: (x > 0).sum(-1),
    "sum_of_integers": lambda x, i: i.sum() + i.sum(0),
    "max_of_integers": lambda x, i: i.amax(1),
    "number_to_a_power": lambda x, i: 2.0 ** x,
}


@pytest.mark.parametrize("name", list(INTEGER_REDUCTIONS))
def test_integer_and_mask_reductions_and_a_number_to_a_power_run_in_fusec(name: str) -> None:
    torch.manual_seed(13)
    x, i = torch.randn(5, 9), torch.randint(-50, 50, (5, 9))
    fn = INTEGER_REDUCTIONS[name]
    out, backend = _run(fn, x, i)
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    want = fn(x, i)
    assert out.dtype == want.dtype
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)


ROUNDINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", list(ROUNDINGS))
def test_floor_ceil_and_trunc_match_pytorch_at_the_edges(name: str, dtype: torch.dtype) -> None:
    fn = ROUNDINGS[name]
    x = torch.tensor([-2.5, -1.0, -0.7, -0.0, 0.0, 0.3, 0.5, 1.0, 1.5, 2.999, 7.25, -7.25,
                      8388607.5, -8388607.5, 1e9, -3e12, float("inf"), float("-inf"),
                      float("nan")], dtype=torch.float32).to(dtype)

    def f(t: torch.Tensor) -> torch.Tensor:
        return fn(t * 1.0) * 2.0

    out, backend = _run(f, x)
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_array_equal(out.float().numpy(), f(x).float().numpy())


def test_integer_clamp_with_number_bounds() -> None:
    """Relative-position buckets clamp int64 tensors (DeBERTa); a float bound
    makes the result float, as in PyTorch."""
    ids = torch.arange(-6, 7).reshape(1, -1) * torch.tensor([[1], [3]])

    def f(t: torch.Tensor) -> torch.Tensor:
        return torch.clamp(t, -4, 5) * 2 + torch.clamp(t, min=0) - torch.clamp(t, max=-1)

    def g(t: torch.Tensor) -> torch.Tensor:
        return torch.clamp(t, 0.5, 3.5)

    for fn in (f, g):
        out, backend = _run(fn, ids)
        assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
        assert out.dtype == fn(ids).dtype
        np.testing.assert_array_equal(out.numpy(), fn(ids).numpy())
