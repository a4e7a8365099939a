"""An honest pass: relu as one Triton kernel, launched by a wrapper that only reads
metadata, makes its input contiguous and allocates the output."""

import torch
import triton
from pass_dir.kernels import relu_kernel

BLOCK = 1024


@torch.fx.wrap
def triton_relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def pattern(in_0):
    return torch.relu(in_0)


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return triton_relu
