"""Code generation: from `fusion.group`s to numba.cuda kernel source and a launch program."""
