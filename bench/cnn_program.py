"""A small ResNet in `nn`, for the channels-last checks (tests/test_channels_last.py
on the CPU, bench/library_conv_check.py on a GPU): convolutions with batch
norms, relus, a max pool, residual adds and a global average pool on NCHW
values, the pattern of torchvision's ResNets through `torch.compile`."""

from __future__ import annotations


class Net:
    """Lines of an `nn` CNN: convolutions with batch norms, activations,
    pools and residual adds on NCHW values."""

    def __init__(self, dt: str, n: int) -> None:
        self.dt, self.n = dt, n
        self.args: list[str] = []
        self.lines: list[str] = []
        self.k = 0

    def t(self, *dims: int) -> str:
        return "tensor<" + "x".join(map(str, dims)) + f"x{self.dt}>"

    def arg(self, *dims: int) -> str:
        name = f"%p{len(self.args)}"
        self.args.append(f"{name}: {self.t(*dims)}")
        return name

    def op(self, text: str) -> str:
        self.k += 1
        self.lines.append(f"  %v{self.k} = {text}")
        return f"%v{self.k}"

    def conv(self, x: str, c: int, hw: int, o: int, k: int, stride: int = 1) -> tuple[str, int]:
        pad = k // 2
        out = (hw + 2 * pad - k) // stride + 1
        w = self.arg(o, c, k, k)
        y = self.op(f"nn.conv2d {x}, {w} {{strides = [{stride}, {stride}], pads = [{pad}, {pad}, "
                    f"{pad}, {pad}], dilations = [1, 1], groups = 1}} : "
                    f"({self.t(self.n, c, hw, hw)}, {self.t(o, c, k, k)}) -> "
                    f"{self.t(self.n, o, out, out)}")
        # scaled by 1/sqrt(fan-in), as trained weights are: random unit
        # weights would take f16 activations past its range in a few layers
        scale = self.op(f"nn.constant dense<{(c * k * k) ** -0.5:.6e}> : tensor<{self.dt}>")
        t = self.t(self.n, o, out, out)
        return self.op(f"nn.mul {y}, {scale} : ({t}, tensor<{self.dt}>) -> {t}"), out

    def bn(self, x: str, c: int, hw: int, relu: bool = True) -> str:
        ps = [self.arg(c) for _ in range(4)]
        y = self.op(f"nn.batch_norm {x}, {', '.join(ps)} {{epsilon = 1.0e-05}} : "
                    f"({self.t(self.n, c, hw, hw)}, {', '.join([self.t(c)] * 4)}) -> "
                    f"{self.t(self.n, c, hw, hw)}")
        return self.op(f"nn.relu {y} : {self.t(self.n, c, hw, hw)}") if relu else y

    def add_relu(self, a: str, b: str, c: int, hw: int) -> str:
        t = self.t(self.n, c, hw, hw)
        return self.op(f"nn.relu {self.op(f'nn.add {a}, {b} : ({t}, {t}) -> {t}')} : {t}")

    def text(self, result: str, shape: str) -> str:
        return (f"func.func @f({', '.join(self.args)}) -> {shape} {{\n" + "\n".join(self.lines)
                + f"\n  func.return {result} : {shape}\n}}\n")


def cnn_text(dt: str = "f32", n: int = 2, hw: int = 32, w: int = 8) -> str:
    """A small ResNet: a 7x7 stride-2 stem with batch norm, relu and a 3x3
    max pool, a bottleneck block with a downsampling 1x1 convolution, one
    with the identity as its residual, a global average pool."""
    net = Net(dt, n)
    x = net.arg(n, 3, hw, hw)
    y, hw = net.conv(x, 3, hw, w, 7, 2)
    y = net.bn(y, w, hw)
    pooled = (hw + 2 - 3) // 2 + 1
    y = net.op(f"nn.max_pool2d {y} {{kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}} "
               f": ({net.t(n, w, hw, hw)}) -> {net.t(n, w, pooled, pooled)}")
    hw, c = pooled, w
    for down in (True, False):
        idt = net.bn(net.conv(y, c, hw, 4 * w, 1)[0], 4 * w, hw, relu=False) if down else y
        z = net.bn(net.conv(y, c, hw, w, 1)[0], w, hw)
        z = net.bn(net.conv(z, w, hw, w, 3)[0], w, hw)
        z = net.bn(net.conv(z, w, hw, 4 * w, 1)[0], 4 * w, hw, relu=False)
        y, c = net.add_relu(z, idt, 4 * w, hw), 4 * w
    m = net.op(f"nn.reduce_mean {y} {{axes = [2, 3], keepdims = true}} : "
               f"({net.t(n, c, hw, hw)}) -> {net.t(n, c, 1, 1)}")
    out = net.op(f"nn.reshape {m} : ({net.t(n, c, 1, 1)}) -> {net.t(n, c)}")
    return net.text(out, net.t(n, c))
