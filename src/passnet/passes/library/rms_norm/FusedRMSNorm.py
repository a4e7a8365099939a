"""T5-style RMSNorm as one Triton kernel.

Matches (google/t5-efficient-large-el2, every ``T5LayerNorm``)::

    variance = x.to(dtype).pow(2).mean(-1, keepdim=True)
    out = weight * (x * torch.rsqrt(variance + eps))

Eager runs six kernels and writes four full-size intermediates. The kernel
keeps a block of rows in registers, reduces the squares in fp32 and writes the
result once. Where eager stores an fp16/bf16 intermediate (the squares, the
mean, ``variance + eps``, the rsqrt, ``x * rsqrt``) the kernel rounds the same
value the same way, so it agrees with eager up to the order of the fp32 sum.

The launch is most of the cost at these sizes, so the wrapper has a fast path for
the real case (x, weight and the cast of one dtype, contiguous, a float eps) and
the kernel takes eight arguments: the three rounding dtypes are one constexpr
``MODE`` and the rows per program follow from the padded row length.
"""

import torch
import triton
import triton.language as tl

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2}
# MODE of the fast path (cast, product and output of one dtype): 13 * kind.
_SAME_KIND_MODE = {torch.float32: 0, torch.float16: 13, torch.bfloat16: 26}


def _promote(a, b):
    """torch's type promotion between two of fp32/fp16/bf16 (fp16 with bf16 gives fp32)."""
    if a == b:
        return a
    if _RANK[a] == _RANK[b]:
        return torch.float32
    return a if _RANK[a] > _RANK[b] else b


def _check_int32_offsets(rule, *operands):
    """Refuse, before any launch, what the kernels' int32 offsets cannot address: a tensor of
    2**31 or more elements, or one read through strides up to an offset of 2**31 or more.
    ``operands`` are ``(name, tensor)`` pairs; a ``None`` tensor is skipped."""
    for name, t in operands:
        if t is None:
            continue
        n = t.numel()
        if n >= 2**31:
            raise ValueError(
                f"{rule}: tensors of 2**31 or more elements are not supported (int32 offsets); "
                f"got {name} with {n} elements"
            )
        reach = 0
        if n:
            for size, stride in zip(t.shape, t.stride()):
                reach += (size - 1) * stride
        if reach >= 2**31:
            raise ValueError(
                f"{rule}: offsets of 2**31 or more are not supported (int32 offsets); got {name} "
                f"of shape {tuple(t.shape)} and strides {t.stride()}, reaching offset {reach}"
            )


def _next_pow2(n):
    """The smallest power of two >= ``n`` >= 1: ``triton.next_power_of_2`` without the ~1.5 us
    of its constexpr-function wrapper (recent Triton, e.g. 3.9)."""
    n -= 1
    n |= n >> 1
    n |= n >> 2
    n |= n >> 4
    n |= n >> 8
    n |= n >> 16
    n |= n >> 32
    return n + 1


@triton.jit
def _round(x, KIND: tl.constexpr):
    # An eager fp16/bf16 op stores its result in that dtype: round where it does.
    # bf16 rounds to nearest-even by bit arithmetic (Triton's interpreter truncates in .to()).
    if KIND == 1:
        x = x.to(tl.float16).to(tl.float32)
    elif KIND == 2:
        u = x.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        x = tl.where(x != x, x, u.to(tl.float32, bitcast=True))
    return x


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    n_rows,
    N,
    eps,
    MODE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # MODE = CAST_KIND + 3 * MUL_KIND + 9 * OUT_KIND (dtype kinds: 0 fp32, 1 fp16, 2 bf16);
    # a program holds ~4K elements: whole rows padded to BLOCK_N (a power of two).
    CAST_KIND: tl.constexpr = MODE % 3
    MUL_KIND: tl.constexpr = (MODE // 3) % 3
    OUT_KIND: tl.constexpr = MODE // 9
    BLOCK_R: tl.constexpr = (4096 + BLOCK_N - 1) // BLOCK_N
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < N
    ok = row_ok[:, None] & col_ok[None, :]
    # x and out are contiguous [n_rows, N]
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=ok, other=0.0)
    x = x.to(tl.float32)
    xc = _round(x, CAST_KIND)
    mean = _round(tl.sum(_round(xc * xc, CAST_KIND), axis=1) / N, CAST_KIND)
    rstd = _round(tl.math.rsqrt(_round(mean + eps, CAST_KIND)), CAST_KIND)
    y = _round(x * rstd[:, None], MUL_KIND)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = w[None, :] * y
    tl.store(
        out_ptr + rows[:, None] * N + cols[None, :],
        _round(y, OUT_KIND).to(out_ptr.dtype.element_ty),
        mask=ok,
    )


def _general(weight, x, cast_dtype, eps):
    """Every case the fast path leaves: mixed dtypes, an int eps, other layouts, long rows."""
    if x.dtype not in _KIND or cast_dtype not in _KIND or weight.dtype not in _KIND:
        raise TypeError(
            f"FusedRMSNorm supports float32/float16/bfloat16, got x {x.dtype}, "
            f"cast to {cast_dtype}, weight {weight.dtype}"
        )
    N = x.shape[-1]
    if weight.dim() != 1 or weight.shape[0] != N:
        raise ValueError(f"FusedRMSNorm: weight {tuple(weight.shape)} does not match rows of {N}")
    if not isinstance(eps, (int, float)):
        raise TypeError(f"FusedRMSNorm: eps must be a number, got {eps!r}")
    # Few arguments keep Triton's launch short: the kernel indexes contiguous rows.
    if not x.is_contiguous():
        x = x.contiguous()
    if not weight.is_contiguous():
        weight = weight.contiguous()
    mul_dtype = _promote(x.dtype, cast_dtype)
    out_dtype = _promote(weight.dtype, mul_dtype)
    out = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    n_rows = x.numel() // N if N else 0
    if n_rows == 0:
        return out
    _check_int32_offsets("FusedRMSNorm", ("x", x), ("weight", weight), ("out", out))
    block_n = _next_pow2(N)
    block_r = max(1, 4096 // block_n)  # as the kernel derives it
    _rms_norm_kernel[((n_rows + block_r - 1) // block_r,)](
        x,
        weight,
        out,
        n_rows,
        N,
        float(eps),
        MODE=_KIND[cast_dtype] + 3 * _KIND[mul_dtype] + 9 * _KIND[out_dtype],
        BLOCK_N=block_n,
        num_warps=4 if block_n <= 4096 else min(16, block_n // 512),
    )
    return out


@torch.fx.wrap
def fused_rms_norm(weight, x, cast_dtype, eps):
    """``weight * (x * rsqrt(mean(x.to(cast_dtype) ** 2, -1) + eps))``."""
    # Fast path (every site of T5 and its variants): x, weight and the cast of one dtype,
    # contiguous, weight [N] with N <= 4096, a float eps, x of fewer than 2**31 elements
    # (int32 offsets: _general refuses larger tensors).
    dtype = x.dtype
    shape = x.shape
    if (
        cast_dtype is dtype
        and weight.dtype is dtype
        and dtype in _SAME_KIND_MODE
        and type(eps) is float
        and weight.shape == shape[-1:]
        and 0 < shape[-1] <= 4096
        and x.is_contiguous()
        and weight.is_contiguous()
    ):
        numel = x.numel()
        if numel < 2**31:
            out = torch.empty_like(x)
            N = shape[-1]
            n_rows = numel // N
            if n_rows:
                # the next power of two >= N (N <= 4096), then ceil(n_rows / (4096 // block_n))
                # programs of 4096 // block_n rows; see _next_pow2
                block_n = N - 1
                block_n |= block_n >> 1
                block_n |= block_n >> 2
                block_n |= block_n >> 4
                block_n |= block_n >> 8
                block_n += 1
                _rms_norm_kernel[((n_rows * block_n + 4095) // 4096,)](
                    x, weight, out, n_rows, N, eps, MODE=_SAME_KIND_MODE[dtype], BLOCK_N=block_n
                )
            return out
    return _general(weight, x, cast_dtype, eps)


def pattern(in_0, in_1, in_2, in_3):
    tmp_0 = in_1.to(in_2)
    tmp_1 = tmp_0.pow(2)
    tmp_2 = tmp_1.mean(-1, keepdim=True)
    tmp_3 = tmp_2 + in_3
    tmp_4 = torch.rsqrt(tmp_3)
    tmp_5 = in_1 * tmp_4
    tmp_6 = in_0 * tmp_5
    return tmp_6


def replacement_args(in_0, in_1, in_2, in_3):
    return (in_0, in_1, in_2, in_3)


def replacement_func():
    return fused_rms_norm
