"""A differential fuzzer: random `nn` programs compiled fused and unfused, run
in numba's CUDA simulator and compared with the NumPy reference interpreter.

`python -m fusec.fuzz --graphs N --seed S --jobs J --out DIR` is the long mode
(docs/testing.md); `tests/test_fuzz.py` runs a fixed-seed slice and every
minimized failure kept under `tests/fuzz_regressions/`.

- `graph.py`: the fuzzer's own small program model and its `nn` text;
- `names.py`: function and value names of random length and characters;
- `generate.py`: random programs over every `nn` op;
- `check.py`: compile, run, compare; what a failure is and which known bug;
- `minimize.py`: greedy delta debugging of a failing program;
- `__main__.py`: the command line.
"""
