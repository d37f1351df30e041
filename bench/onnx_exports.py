"""Hugging Face GPT-2, BERT and ViT through PyTorch's default ONNX export
into fusec, checked and timed against onnxruntime.

    python bench/onnx_exports.py                      # GPU: full width, table
    python bench/onnx_exports.py --device cpu --size tiny   # CPU: simulator check

Each model is built from its `transformers` config with random weights
(seeded) and the default attention implementation (SDPA, whose export
writes the `IsNaN`/`Where` guard around the softmax), wrapped to return the
last hidden state, exported with `torch.onnx.export` as PyTorch exports by
default (the dynamo exporter in PyTorch 2.9+; it needs `onnxscript`),
imported with fusec's importer (weights of at least `--params-above` bytes
become arguments), compiled, and run beside onnxruntime on the same inputs.
BERT gets an attention mask with padding in its second sequence.

The table (model, attention, ONNX nodes, fusec launches, max abs error
against onnxruntime on the CPU, fusec ms, onnxruntime CUDA and CPU ms) is
printed; on the GPU it is appended, with date, device and commit
($FUSEC_COMMIT), to OUT/DATE-DEVICE.md (the file bench/run_gpu.py writes).
`--device cpu` runs fusec's kernels in numba's CUDA simulator and does not
time (tests/test_onnx_hf_exports.py runs it at `--size tiny`).

torch, transformers, onnx, onnxscript and onnxruntime are optional extras
of fusec; only this script and its test import them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ("gpt2", "bert", "vit")
PARAMS_ABOVE = 65536  # bytes: larger float weights become fusec arguments


@dataclass(frozen=True)
class Size:
    """Model and input dimensions (`tiny`: the simulator; `full`: the GPU)."""

    hidden: int
    heads: int
    layers: int
    ffn: int
    vocab: int
    batch: int
    seq: int
    image: int
    patch: int


SIZES = {
    "tiny": Size(hidden=32, heads=2, layers=2, ffn=64, vocab=64, batch=2, seq=8, image=16,
                 patch=8),
    # Width of the base models (768, 12 heads); 4 layers keep numba's JIT of
    # every kernel on the first call within minutes.
    "full": Size(hidden=768, heads=12, layers=4, ffn=3072, vocab=8192, batch=8, seq=128,
                 image=224, patch=16),
}


@dataclass
class Case:
    """One model: the torch module, its named inputs, and what was measured."""

    name: str
    module: Any
    inputs: dict[str, np.ndarray]
    attention: str
    row: dict[str, str] = field(default_factory=dict[str, str])


def build(name: str, size: Size, seed: int = 0) -> Case:
    """The `transformers` model `name` with random weights, and its inputs."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, size.vocab, (size.batch, size.seq)).astype(np.int64)
    common = {"num_hidden_layers": size.layers, "num_attention_heads": size.heads,
              "hidden_size": size.hidden, "intermediate_size": size.ffn}
    inputs: dict[str, np.ndarray]
    if name == "gpt2":
        config = tf.GPT2Config(n_embd=size.hidden, n_layer=size.layers, n_head=size.heads,
                               n_inner=size.ffn, vocab_size=size.vocab,
                               n_positions=size.seq, use_cache=False,
                               bos_token_id=0, eos_token_id=0)
        module, inputs = tf.GPT2Model(config), {"input_ids": ids}
    elif name == "bert":
        config = tf.BertConfig(vocab_size=size.vocab, max_position_embeddings=size.seq,
                               **common)
        mask = np.ones_like(ids)
        mask[-1, size.seq // 2:] = 0  # the last sequence is padded
        module, inputs = tf.BertModel(config), {"input_ids": ids, "attention_mask": mask}
    elif name == "vit":
        config = tf.ViTConfig(image_size=size.image, patch_size=size.patch, num_channels=3,
                              **common)
        pixels = rng.standard_normal((size.batch, 3, size.image, size.image))
        module, inputs = tf.ViTModel(config), {"pixel_values": pixels.astype(np.float32)}
    else:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    module.eval()
    attention = str(getattr(module.config, "_attn_implementation", None) or "default")
    return Case(name, module, inputs, attention)


def export(case: Case, path: Path, exporter: str = "default") -> Any:
    """`torch.onnx.export` of `case` with PyTorch's default exporter (or,
    `exporter="torchscript"`, the older TorchScript one, opset 18); the ONNX
    model, also saved (one file) at `path`."""
    import onnx
    import torch

    names = list(case.inputs)

    class LastHidden(torch.nn.Module):
        """Positional tensors in, the last hidden state out (no cache
        objects, no output dict: what an exporter can write)."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, tensors, strict=True)))[0]

    args = tuple(torch.from_numpy(case.inputs[n]) for n in names)
    wrapper = LastHidden(case.module).eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # exporter notices; shapes are static
        if exporter == "default":  # its own opset; the program in memory, weights and all
            model = torch.onnx.export(wrapper, args, input_names=names, output_names=["y"],
                                      verbose=False).model_proto
        else:
            torch.onnx.export(wrapper, args, str(path), input_names=names, output_names=["y"],
                              dynamo=False, opset_version=18)
            model = onnx.load(str(path))
    onnx.save(model, str(path))  # one file, weights inline (the models are < 2 GB)
    return model


@dataclass
class Fusec:
    """fusec's compiled model of an export and its arguments in order."""

    model: Any
    args: list[Any]
    seconds: dict[str, float]


def compile_fusec(path: Path, case: Case, device: str, params_above: int) -> Fusec:
    """Import the export at `path` with fusec's ONNX importer and compile it
    for `device` ("gpu" or "sim")."""
    import fusec
    from fusec.importers.onnx import import_model

    t0 = time.perf_counter()
    result = import_model(path, filename=str(path.with_suffix(".mlir")),
                          params_above=params_above)
    t1 = time.perf_counter()
    model = fusec.compile(result.text, device=device)
    t2 = time.perf_counter()
    by_arg = {result.inputs[n]: a for n, a in case.inputs.items()}
    args = [by_arg[a] if a in by_arg else result.params[a] for a in model.input_names]
    return Fusec(model, args, {"import": t1 - t0, "compile": t2 - t1})


def ort_session(path: Path, provider: str) -> Any:
    """An onnxruntime session on `provider`, or None where it is not installed."""
    import onnxruntime as ort

    if provider not in ort.get_available_providers():
        return None
    options = ort.SessionOptions()
    options.log_severity_level = 3  # no provider-assignment notices in the table's output
    return ort.InferenceSession(str(path), options, providers=[provider])


def _median_ms(fn: Any, iters: int, repeat: int, sync: Any = None) -> float:
    """Median over `repeat` samples of the mean wall-clock ms of `fn()`."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        if sync is not None:
            sync()
        samples.append((time.perf_counter() - t0) * 1e3 / iters)
    return float(np.median(samples))


def time_ort_cuda(session: Any, feeds: dict[str, np.ndarray], iters: int,
                  repeat: int) -> float:
    """ms per `run_with_iobinding`, inputs and output resident on the GPU
    (the run returns after the CUDA provider's stream is synchronised)."""
    import onnxruntime as ort

    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, "cuda", 0))
    binding.bind_output("y", "cuda")
    return _median_ms(lambda: session.run_with_iobinding(binding), iters, repeat)


def _error(got: Any, ref: np.ndarray) -> tuple[float, bool]:
    """Max abs error and whether it is within f32's documented tolerance
    (relative to max |reference|, as `fusec run --check`)."""
    from fusec.dialects.element_types import element

    err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - ref)))
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    return err, err <= element("f32").tolerance * scale


def run_case(case: Case, tmp: Path, args: argparse.Namespace) -> dict[str, str]:
    """Export, import, compile, run and compare one model; its table row."""
    path = tmp / f"{case.name}.onnx"
    t0 = time.perf_counter()
    model = export(case, path, args.exporter)
    exported = time.perf_counter() - t0
    cpu = ort_session(path, "CPUExecutionProvider")
    (ref,) = cpu.run(["y"], case.inputs)
    fx = compile_fusec(path, case, "gpu" if args.device == "cuda" else "sim",
                       args.params_above)
    row = {"model": case.name, "attention": case.attention,
           "ONNX nodes": str(len(model.graph.node)),
           "fusec launches": _launches(fx.model)}
    if args.device == "cuda":
        got, times = _gpu_times(case, fx, path, args)
        cpu_ms = _median_ms(lambda: cpu.run(["y"], case.inputs), max(1, args.iters // 4), 3)
        times["onnxruntime CPU ms"] = f"{cpu_ms:.2f}"
    else:  # the simulator's speed means nothing: not timed
        got, times = fx.model(*fx.args), {"fusec ms": "- (simulator)"}
    err, ok = _error(got, ref.astype(np.float64))
    row["max abs err vs onnxruntime"] = f"{err:.2e} ({'ok' if ok else 'MISMATCH'})"
    row.update(times)
    seconds = {"export": exported, **fx.seconds}
    row["set-up s"] = ", ".join(f"{k} {v:.1f}" for k, v in seconds.items())
    case.row = row
    return row


def _launches(model: Any) -> str:
    library = sum(1 for launch in model.signature.launches if launch.library)
    return f"{model.launches}" + (f" ({library} cuBLAS)" if library else "")


def _gpu_times(case: Case, fx: Fusec, path: Path,
               args: argparse.Namespace) -> tuple[Any, dict[str, str]]:
    """fusec's output (inputs on the GPU) and the GPU timings of fusec and
    onnxruntime's CUDA provider."""
    import torch
    from run_gpu import _time_fusec

    inputs = [torch.as_tensor(np.ascontiguousarray(a), device="cuda") for a in fx.args]
    out = fx.model(*inputs)
    torch.cuda.synchronize()
    got = out.cpu().numpy() if hasattr(out, "cpu") else np.asarray(out)
    times = {"fusec ms": f"{_time_fusec(torch, fx.model, inputs, args):.3f}"}
    try:  # onnxruntime's CUDA provider may be missing or built for another CUDA
        session = ort_session(path, "CUDAExecutionProvider")
        times["onnxruntime CUDA ms"] = (
            f"{time_ort_cuda(session, case.inputs, args.iters, args.repeat):.3f}"
            if session is not None else "n/a (no CUDA provider)")
    except Exception as err:  # the row keeps fusec's numbers
        times["onnxruntime CUDA ms"] = f"n/a ({type(err).__name__}: {str(err)[:80]})"
    return got, times


COLUMNS = ("model", "attention", "ONNX nodes", "fusec launches", "max abs err vs onnxruntime",
           "fusec ms", "onnxruntime CUDA ms", "onnxruntime CPU ms", "set-up s")


def table(rows: list[dict[str, str]], title: str) -> list[str]:
    """The markdown table of `rows`."""
    lines = [f"## {title}", "", "| " + " | ".join(COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r.get(c, "-") for c in COLUMNS) + " |" for r in rows]
    return [*lines, ""]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"of: {', '.join(MODELS)}")
    p.add_argument("--size", choices=sorted(SIZES), default=None,
                   help="model and input dimensions (default: full on cuda, tiny on cpu)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda: check and time on the GPU; cpu: check, fusec in the simulator")
    p.add_argument("--exporter", choices=["default", "torchscript"], default="default",
                   help="torch.onnx.export as PyTorch exports by default (dynamo in "
                        "PyTorch 2.9+, needs onnxscript), or the TorchScript exporter")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--params-above", type=int, default=PARAMS_ABOVE, metavar="BYTES")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        p.error(f"unknown model '{unknown[0]}' (known: {', '.join(MODELS)})")
    args.size = args.size or ("full" if args.device == "cuda" else "tiny")
    if args.device == "cpu" and args.size != "tiny":
        p.error("--device cpu runs fusec's kernels in numba's simulator: use --size tiny")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the exports; the exit code is 1 when a model failed or mismatched."""
    args = _parse(argv)
    from fusec.runtime.device import select_device

    select_device("gpu" if args.device == "cuda" else "sim")  # before numba.cuda loads
    sys.path.insert(0, str(HERE))  # run_gpu (GPU timing helpers) lives beside this file
    rows: list[dict[str, str]] = []
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fusec-hf-onnx-") as tmp:
        for name in args.models.split(","):
            print(f"== {name}", flush=True)
            try:
                row = run_case(build(name, SIZES[args.size]), Path(tmp), args)
                failed += "MISMATCH" in row["max abs err vs onnxruntime"]
            except Exception as err:  # one model's failure must not lose the others' rows
                traceback.print_exc()
                failed += 1
                row = {"model": name, "attention": f"FAILED ({type(err).__name__}: {err})"}
            rows.append(row)
    s = SIZES[args.size]
    title = (f"Hugging Face exports via ONNX ({args.exporter} exporter), {args.size} "
             f"({s.layers} layers, hidden {s.hidden}, batch {s.batch}, seq {s.seq}, "
             f"image {s.image}), {args.device}")
    lines = table(rows, title)
    print("\n".join(lines), flush=True)
    if args.device == "cuda":
        _write_results(args.out, lines)
    return 1 if failed else 0


def _write_results(out: str, lines: list[str]) -> None:
    import torch
    from run_gpu import _header, _write

    header = [*_header(torch, 0.0, 0.0, title="fusec Hugging Face ONNX exports")[:1], ""]
    _write(out, header + lines, torch, append=True)


if __name__ == "__main__":
    sys.exit(main())
