"""The arithmetic a run trains and evaluates with on a GPU (executor.precision).

Semantics:
- exact (the default): IEEE float32 by deterministic kernels. cuDNN without TF32 and without benchmarking,
  float32 matrix products at torch's "highest" precision. Without it cuDNN computes the larger convolutions in
  TF32 (a 10-bit mantissa) and may pick kernels that add in a varying order; measured on an H200 (torch 2.11):
  quickstart's first round (cnn_512) was 1.6e-3 from the CPU's train loss in TF32 and 7e-9 in float32, and two
  runs of one scenario with the batched executor differed from round 2 on; with it, two runs give the same
  tables. A GPU's results still match the CPU's within float tolerance only, not bit for bit (other kernels,
  other summation orders), and later rounds compound the differences: quickstart's 60 rounds ended at 0.958
  against the CPU's 0.960.
- tf32: matrix products and convolutions in TF32 (float32 storage, 10-bit mantissa products, float32 sums),
  kernels still deterministic: repeatable on one GPU, not equal to exact.
- bf16: as exact, with the forward and backward passes under torch.autocast(bfloat16): matrix products and
  convolutions in bfloat16, parameters, optimizer state and reductions in float32. Repeatable on one GPU.
- The simulated clock is the same in every mode: FLOPs are counted on the model and bytes on the payloads, not
  on the arithmetic the host happens to use. benchmarks/gpu.py measures each mode's speed and accuracy.
- The process's own settings come back after each block, so a user's code in the same process keeps its choice.
  On the CPU there is nothing to set (the schema refuses a fast mode there).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator

import torch

MATMUL = {"exact": "highest", "tf32": "high", "bf16": "highest"}   # torch.set_float32_matmul_precision


@contextmanager
def arithmetic(device: torch.device, precision: str = "exact") -> Iterator[None]:
    """Within it, computing on `device` follows executor.precision (the module's docstring)."""
    if device.type != "cuda":
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(MATMUL[precision])
    # no cast cache: it keeps a bfloat16 copy of each leaf parameter for the whole block (a round's training), a
    # stale copy of a parameter updated in place, and one more copy a step of the new tensors local.py makes
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False) if precision == "bf16" \
        else nullcontext()
    try:
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True,
                                        allow_tf32=precision == "tf32"), autocast:
            yield
    finally:
        torch.set_float32_matmul_precision(before)


def exact_float32(device: torch.device) -> Iterator[None]:
    """IEEE float32 by deterministic kernels on `device` (precision exact)."""
    return arithmetic(device, "exact")
