"""A differential fuzzer: random `nn` programs compiled fused and unfused, run
in numba's CUDA simulator (or on a GPU) and compared with the NumPy reference
interpreter.

`python -m fusec.fuzz --mode M --graphs N --seed S --jobs J --out DIR` is the
long mode (docs/testing.md); `tests/test_fuzz.py` runs a fixed-seed slice and
every minimized failure kept under `tests/fuzz_regressions/`,
`tests/test_fuzz_modes.py` a slice of each mode.

- `graph.py`: the fuzzer's own small program model and its `nn` text;
- `names.py`: function and value names of random length and characters;
- `generate.py`, `ops.py`: random programs over every `nn` op;
- `conv_graphs.py`, `reuse_graphs.py`: programs around conv2d, and around
  values read directly and through gather / transpose chains;
- `data_movement.py`, `movement_extents.py`: the data-movement corpus
  `bench/data_movement.py` times (permutations, view chains, windows,
  strides, gathers, concat/split, with pointwise neighbours);
- `special.py`: edge and special input values;
- `modes.py`: the modes, one table row each;
- `check.py`: compile, run, compare; what a failure is;
- `triage.py`: which known bug a failure is;
- `run.py`: one graph's generation, check, triage and minimizing;
- `minimize.py`: greedy delta debugging of a failing program;
- `__main__.py`: the command line.
"""
