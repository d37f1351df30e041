"""fusec: a kernel-fusion compiler for tensor programs written in the `nn` dialect."""

__version__ = "0.1.0"
