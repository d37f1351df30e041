"""The real models the benchmarks build (random weights, seeded, eval mode, fp32, on the CPU).

Shared by bench/torch_compile_models.py (times and fallbacks through the
backend) and bench/first_call.py (first-call compile times). Each builder
takes `small`: the full size the benchmarks measure, or a tiny one of the
same architecture for the simulator (fusec's kernels in numba's CUDA
simulator on the CPU).

- `gpt2`: Hugging Face GPT-2 (`GPT2Model`, 6 layers, D768, 12 heads), B4 S256;
- `llama`: a Llama-style decoder (`LlamaModel`: 4 layers, hidden 1024,
  grouped-query attention with 16 query and 4 key/value heads), B2 S256;
- `vit`: timm's `vit_base_patch16_224`, B16 224x224; torchvision's
  `vit_b_16` where timm is missing (the case's `size` says which);
- `resnet50`: torchvision's `resnet50(weights=None)`, B32 224x224;
- `gpt2_layer`: one transformers `GPT2Block` (GPT-2 small: D768, 12 heads),
  B8 S512, returning its hidden states;
- `mobilenet_v2`: torchvision's `mobilenet_v2(weights=None)`, N32 224x224;
- `bert`: Hugging Face BERT (`BertModel`, BERT-base: 12 layers, D768, 12
  heads), B8 S256 with a padding mask: batch entry i holds 256 - 24 i tokens.
- `roberta`: Hugging Face RoBERTa (`RobertaModel`, base: 12 layers, D768),
  B8 S256, its padding read from the token ids (position ids counted with a
  cumulative sum over the mask) and an attention mask;
- `t5_encoder`: Hugging Face T5's encoder (`T5EncoderModel`, t5-small: 6
  layers, D512, 8 heads), B8 S256: bucketed relative position biases, RMS norms;
- `convnext`: timm's `convnext_tiny`, B32 224x224: 7x7 depthwise convolutions,
  layer norms over channels in channels-last order;
- `swin`: timm's `swin_tiny_patch4_window7_224`, B16 224x224: shifted windows
  (rolls, window partitions and their reverse, masks).

The Hugging Face models are built with `use_cache=False`: one forward pass
over the whole sequence, no key/value cache built or returned. A builder
whose package is missing raises ImportError. Nothing is imported until a
builder runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Case:
    """A model ready to compile: the module, its example inputs and the size in words."""

    name: str
    module: Any
    inputs: tuple[Any, ...]
    size: str


def _with_ids(torch: Any, model_class: Any, config: Any, b: int, s: int) -> tuple[Any, Any]:
    """A Hugging Face model of `config` (seeded random weights, eval mode) and
    B x S random token ids."""
    torch.manual_seed(0)
    model = model_class(config).eval()
    return model, torch.randint(0, config.vocab_size, (b, s))


def gpt2(torch: Any, small: bool) -> Case:
    """GPT2Model: 6 layers at B4 S256 (2 layers, D32, 2 heads, vocabulary 128 at B1 S8)."""
    from transformers import GPT2Config, GPT2Model

    b, s = (1, 8) if small else (4, 256)
    shape = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64) if small \
        else dict(n_layer=6, n_positions=1024)
    config = GPT2Config(use_cache=False, **shape)
    torch.manual_seed(0)
    model = GPT2Model(config).eval()
    ids = torch.randint(0, config.vocab_size, (b, s))
    return Case("gpt2", model, (ids,),
                f"GPT2Model {config.n_layer} layers, D{config.n_embd} H{config.n_head}, B{b} S{s}")


def llama(torch: Any, small: bool) -> Case:
    """LlamaModel: 4 layers, hidden 1024, 16/4 heads at B2 S256 (2 layers, hidden 64,
    4/2 heads at B1 S8: still grouped-query)."""
    from transformers import LlamaConfig, LlamaModel

    b, s = (1, 8) if small else (2, 256)
    shape = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                 max_position_embeddings=64) if small \
        else dict(num_hidden_layers=4, hidden_size=1024, intermediate_size=2816,
                  num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                  max_position_embeddings=1024)
    config = LlamaConfig(use_cache=False, **shape)
    model, ids = _with_ids(torch, LlamaModel, config, b, s)
    return Case("llama", model, (ids,),
                f"LlamaModel {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
                f"{config.num_attention_heads}/{config.num_key_value_heads} heads, B{b} S{s}")


def vit(torch: Any, small: bool) -> Case:
    """ViT-B/16 at B16 224x224: timm's `vit_base_patch16_224`, else torchvision's
    `vit_b_16` (small: 1 layer, D32, 2 heads, 32x32 images, B1)."""
    n, hw = (1, 32) if small else (16, 224)
    tiny = dict(depth=1, embed_dim=32, num_heads=2, img_size=hw, num_classes=10)
    torch.manual_seed(0)
    try:
        import timm
    except ImportError:
        timm = None
    if timm is not None:
        model = timm.create_model("vit_base_patch16_224", pretrained=False,
                                  **(tiny if small else {}))
        source = "timm vit_base_patch16_224"
    else:
        try:
            from torchvision.models import VisionTransformer, vit_b_16
        except ImportError as err:
            raise ImportError(f"vit needs timm or torchvision ({err})") from err
        model = VisionTransformer(image_size=hw, patch_size=16, num_layers=1, num_heads=2,
                                  hidden_dim=32, mlp_dim=128, num_classes=10) if small \
            else vit_b_16(weights=None)
        source = "torchvision vit_b_16 (timm missing)"
    size = f"{source}{' (1 layer, D32)' if small else ''}, B{n} {hw}x{hw}"
    return Case("vit", model.eval(), (torch.randn(n, 3, hw, hw),), size)


def resnet50(torch: Any, small: bool) -> Case:
    """torchvision's ResNet-50, B32 224x224 (B1 32x32, 10 classes)."""
    from torchvision.models import resnet50 as build

    n, hw = (1, 32) if small else (32, 224)
    torch.manual_seed(0)
    model = build(weights=None, num_classes=10 if small else 1000).eval()
    return Case("resnet50", model, (torch.randn(n, 3, hw, hw),), f"B{n} {hw}x{hw}")


def gpt2_layer(torch: Any, small: bool) -> Case:
    """One transformers GPT2Block; the wrapper returns its hidden states."""
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    b, s, d, h = (1, 8, 32, 2) if small else (8, 512, 768, 12)
    config = GPT2Config(n_embd=d, n_head=h, n_positions=max(s, 1024), n_layer=1)
    torch.manual_seed(0)
    block = GPT2Block(config, layer_idx=0).eval()

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = block

        def forward(self, x: Any) -> Any:
            out = self.block(x)
            return out[0] if isinstance(out, tuple) else out

    impl = getattr(config, "_attn_implementation", None) or "default"
    return Case("gpt2_layer", Layer().eval(), (torch.randn(b, s, d),),
                f"B{b} S{s} D{d} H{h}, attention '{impl}'")


def mobilenet_v2(torch: Any, small: bool) -> Case:
    """torchvision's MobileNetV2 with random weights."""
    from torchvision.models import mobilenet_v2 as build

    torch.manual_seed(0)
    module = build(weights=None, num_classes=10 if small else 1000).eval()
    n, hw = (1, 32) if small else (32, 224)
    return Case("mobilenet_v2", module, (torch.randn(n, 3, hw, hw),), f"N{n} {hw}x{hw}")


def _padded_encoder(torch: Any, small: bool, config_class: Any, model_class: Any,
                    pad_ids: bool) -> tuple[Any, Any, Any, str]:
    """A BERT-family encoder (base, 12 layers, at B8 S256; 2 layers, D32, 2
    heads, vocabulary 128 at B2 S8) with random weights, its token ids and an
    attention mask that pads the later batch entries: entry i keeps
    256 - 24 i tokens (at least one, so that no query row is masked whole);
    `pad_ids` also makes the padded ids the pad token. Returns the model, the
    ids, the mask and the size in words."""
    b, s = (2, 8) if small else (8, 256)
    shape = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                 intermediate_size=64, vocab_size=128, max_position_embeddings=64) if small \
        else dict(num_hidden_layers=12)
    config = config_class(**shape)
    torch.manual_seed(0)
    model = model_class(config, add_pooling_layer=False).eval()
    ids = torch.randint(3 if pad_ids else 0, config.vocab_size, (b, s))
    mask = torch.ones(b, s, dtype=torch.long)
    for i in range(b):
        keep = max(1, s - i * max(1, 3 * s // 32))
        mask[i, keep:] = 0
        if pad_ids:
            ids[i, keep:] = config.pad_token_id
    return model, ids, mask, (f"{config.num_hidden_layers} layers, D{config.hidden_size} "
                              f"H{config.num_attention_heads}, B{b} S{s}")


def bert(torch: Any, small: bool) -> Case:
    """BertModel with a padding mask (`_padded_encoder`)."""
    from transformers import BertConfig, BertModel

    model, ids, mask, size = _padded_encoder(torch, small, BertConfig, BertModel, False)
    return Case("bert", model, (ids, mask), f"BertModel {size}, padding mask")


def roberta(torch: Any, small: bool) -> Case:
    """RobertaModel whose padded entries end in pad tokens (id 1), which its
    position ids skip, and the same mask (`_padded_encoder`)."""
    from transformers import RobertaConfig, RobertaModel

    model, ids, mask, size = _padded_encoder(torch, small, RobertaConfig, RobertaModel, True)
    return Case("roberta", model, (ids, mask), f"RobertaModel {size}, padding")


def t5_encoder(torch: Any, small: bool) -> Case:
    """T5EncoderModel: t5-small's shape at B8 S256 (2 layers, D32, 2 heads at B2 S8)."""
    from transformers import T5Config, T5EncoderModel

    b, s = (2, 8) if small else (8, 256)
    shape = dict(num_layers=2, d_model=32, d_kv=16, num_heads=2, d_ff=64, vocab_size=128) \
        if small else dict(num_layers=6, d_model=512, d_kv=64, num_heads=8, d_ff=2048)
    config = T5Config(**shape, use_cache=False)
    model, ids = _with_ids(torch, T5EncoderModel, config, b, s)
    return Case("t5_encoder", model, (ids,),
                f"T5EncoderModel {config.num_layers} layers, D{config.d_model} "
                f"H{config.num_heads}, B{b} S{s}")


def _timm(torch: Any, name: str, small_args: dict[str, Any], small: bool) -> Any:
    """timm's model `name` with random weights (`small_args` for the tiny one)."""
    try:
        import timm
    except ImportError as err:
        raise ImportError(f"{name} needs timm ({err})") from err
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, **(small_args if small else {})).eval()


def convnext(torch: Any, small: bool) -> Case:
    """timm's ConvNeXt-T at B32 224x224 (4 stages of one block, 8 to 32 channels, B1 32x32)."""
    n, hw = (1, 32) if small else (32, 224)
    model = _timm(torch, "convnext_tiny",
                  dict(depths=(1, 1, 1, 1), dims=(8, 16, 24, 32), num_classes=10), small)
    return Case("convnext", model, (torch.randn(n, 3, hw, hw),),
                f"timm convnext_tiny{' (4 stages of 1 block)' if small else ''}, B{n} {hw}x{hw}")


def swin(torch: Any, small: bool) -> Case:
    """timm's Swin-T (window 7) at B16 224x224 (2 stages of 2 blocks, D16, 56x56, B1)."""
    n, hw = (1, 56) if small else (16, 224)
    model = _timm(torch, "swin_tiny_patch4_window7_224",
                  dict(img_size=hw, depths=(2, 2), num_heads=(1, 2), embed_dim=16,
                       num_classes=10), small)
    return Case("swin", model, (torch.randn(n, 3, hw, hw),),
                f"timm swin_tiny_patch4_window7_224{' (2 stages, D16)' if small else ''}, "
                f"B{n} {hw}x{hw}")


BUILDERS: dict[str, Callable[[Any, bool], Case]] = {
    "gpt2": gpt2, "llama": llama, "vit": vit, "resnet50": resnet50,
    "gpt2_layer": gpt2_layer, "mobilenet_v2": mobilenet_v2, "bert": bert,
    "roberta": roberta, "t5_encoder": t5_encoder, "convnext": convnext, "swin": swin}


def build(name: str, small: bool = False) -> Case:
    """The case `name` (KeyError for an unknown one, ImportError for a missing package)."""
    import torch

    return BUILDERS[name](torch, small)
