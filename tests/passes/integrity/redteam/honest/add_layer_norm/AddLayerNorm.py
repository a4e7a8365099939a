"""An honest multi-output pass: ``s = a + b; y = layer_norm(s)`` returning both, in one
Triton kernel. The normalized shape and eps are pattern inputs bound to the graph's
literals, so one pass serves every width."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_layer_norm_kernel(
    a_ptr, b_ptr, w_ptr, bias_ptr, sum_ptr, out_ptr, N, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    a = tl.load(a_ptr + row * N + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + row * N + cols, mask=mask, other=0.0)
    s = a + b
    tl.store(sum_ptr + row * N + cols, s, mask=mask)
    x = s.to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + cols, (d * rstd * w + c).to(out_ptr.dtype.element_ty), mask=mask)


def add_layer_norm(a, b, shape, weight, bias, eps):
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(
            f"AddLayerNorm expects equal shapes and dtypes, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    a = a.contiguous()
    b = b.contiguous()
    n = 1
    for d in shape:
        n *= d
    total = torch.empty_like(a)
    out = torch.empty_like(a)
    _add_layer_norm_kernel[(a.numel() // n,)](
        a,
        b,
        weight.contiguous(),
        bias.contiguous(),
        total,
        out,
        n,
        eps,
        BLOCK=triton.next_power_of_2(n),
    )
    return total, out


def pattern(in_0, in_1, in_2, in_3, in_4, in_5):
    tmp = in_0 + in_1
    out = torch.nn.functional.layer_norm(tmp, in_2, in_3, in_4, in_5)
    return (tmp, out)


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5):
    return (in_0, in_1, in_2, in_3, in_4, in_5)


def replacement_func():
    return add_layer_norm
