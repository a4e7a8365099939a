"""Masked mean pooling (sentence-transformers' ``mean_pooling``) as one Triton kernel.

Matches (splade-mini, the PassNet paper's BGE case)::

    m = mask.unsqueeze(-1).expand(sizes).to(dtype)
    out = torch.cat([torch.sum(hidden * m, 1) / torch.clamp(m.sum(1), min=1e-09)], 1)

Eager runs six kernels and materialises the expanded ``[B, S, D]`` float mask
twice. The kernel reads the ``[B, S]`` mask directly, keeps ``sum(mask * hidden)``
and ``sum(mask)`` in fp32 registers and writes the ``[B, D]`` result once. Every
value eager rounds to fp16/bf16 between two ops is rounded the same way here, so
the result is bitwise eager's up to the order of the fp32 sums.

The launch is most of the cost at these sizes, so the wrapper has a fast path for
the real case (contiguous operands, the mask cast to fp32 or to the hidden
states' dtype) and the kernel takes eight arguments: the two rounding dtypes are
one constexpr ``MODE`` and the sequence block follows from the feature block.
"""

import torch
import triton
import triton.language as tl

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2}
# MODE when the mask's cast dtype is also the output's (cast to fp32, or to the hidden
# states' dtype): MASK_KIND + 3 * OUT_KIND = 4 * kind.
_SAME_KIND_MODE = {torch.float32: 0, torch.float16: 4, torch.bfloat16: 8}


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
def _masked_mean_pool_kernel(
    h_ptr,
    m_ptr,
    out_ptr,
    S,
    D,
    clamp_min,
    MODE: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # hidden [B, S, D] and mask [B, S] contiguous; one program: batch row b, BLOCK_D features,
    # over S in blocks of BLOCK_S (~4K elements a block).
    # MODE = MASK_KIND + 3 * OUT_KIND (dtype kinds: 0 fp32, 1 fp16, 2 bf16).
    MASK_KIND: tl.constexpr = MODE % 3
    OUT_KIND: tl.constexpr = MODE // 3
    BLOCK_S: tl.constexpr = 4096 // BLOCK_D
    b = tl.program_id(0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    count = tl.zeros([BLOCK_S], dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        s_ok = s < S
        m = tl.load(m_ptr + b * S + s, mask=s_ok, other=0).to(tl.float32)
        m = _round(m, MASK_KIND)
        h = tl.load(
            h_ptr + (b * S + s[:, None]) * D + d[None, :],
            mask=s_ok[:, None] & d_ok[None, :],
            other=0.0,
        ).to(tl.float32)
        acc += tl.sum(_round(h * m[:, None], OUT_KIND), axis=0)
        count += m
    total = _round(acc, OUT_KIND)
    n = _round(tl.sum(count, axis=0), MASK_KIND)
    n = _round(tl.maximum(n, clamp_min), MASK_KIND)
    tl.store(
        out_ptr + b * D + d, _round(total / n, OUT_KIND).to(out_ptr.dtype.element_ty), mask=d_ok
    )


def _general(hidden, mask, sizes, mask_dtype, clamp_min):
    """Every case the fast path leaves: other dtypes, layouts, sizes given as a list."""
    if hidden.dim() != 3 or mask.dim() != 2 or mask.shape != hidden.shape[:2]:
        raise ValueError(
            f"FusedMaskedMeanPooling expects hidden [B, S, D] and mask [B, S], "
            f"got {tuple(hidden.shape)} and {tuple(mask.shape)}"
        )
    if tuple(sizes) != tuple(hidden.shape):
        raise ValueError(
            f"FusedMaskedMeanPooling: the mask is expanded to {tuple(sizes)}, "
            f"not to the hidden states' shape {tuple(hidden.shape)}"
        )
    if hidden.dtype not in _KIND or mask_dtype not in _KIND:
        raise TypeError(
            f"FusedMaskedMeanPooling supports float32/float16/bfloat16, "
            f"got hidden {hidden.dtype} and mask cast to {mask_dtype}"
        )
    # Few arguments keep Triton's launch short: the kernel indexes contiguous tensors.
    if not hidden.is_contiguous():
        hidden = hidden.contiguous()
    if not mask.is_contiguous():
        mask = mask.contiguous()
    out_dtype = _promote(hidden.dtype, mask_dtype)
    B, S, D = hidden.shape
    out = torch.empty((B, D), dtype=out_dtype, device=hidden.device)
    if B * D == 0:
        return out
    _check_int32_offsets("FusedMaskedMeanPooling", ("hidden", hidden), ("mask", mask), ("out", out))
    BLOCK_D = 128 if D >= 128 else _next_pow2(D)
    _masked_mean_pool_kernel[(B, (D + BLOCK_D - 1) // BLOCK_D)](
        hidden,
        mask,
        out,
        S,
        D,
        float(clamp_min),
        MODE=_KIND[mask_dtype] + 3 * _KIND[out_dtype],
        BLOCK_D=BLOCK_D,
    )
    return out


@torch.fx.wrap
def fused_masked_mean_pooling(hidden, mask, sizes, mask_dtype, clamp_min):
    """``sum(hidden * mask, 1) / clamp(sum(mask, 1), min)`` over ``[B, S, D]`` / ``[B, S]``."""
    # Fast path (splade-mini and its variants): the mask cast to fp32 or to the hidden
    # states' dtype (the output's dtype either way), sizes the hidden states' shape as a
    # tuple, contiguous operands, a float clamp; hidden [B, S, D] and out [B, D] of fewer
    # than 2**31 elements (int32 offsets: B * (S + 1) * D bounds both, _general refuses).
    shape = hidden.shape
    if (
        (mask_dtype is torch.float32 or mask_dtype is hidden.dtype)
        and hidden.dtype in _KIND
        and type(clamp_min) is float
        and sizes == shape
        and len(shape) == 3
        and mask.shape == shape[:2]
        and hidden.is_contiguous()
        and mask.is_contiguous()
    ):
        B, S, D = shape
        if B * (S + 1) * D < 2**31:
            out = hidden.new_empty((B, D), dtype=mask_dtype)
            if B * D:
                if D >= 128:
                    block_d = 128
                else:  # the next power of two >= D; see _next_pow2
                    block_d = D - 1
                    block_d |= block_d >> 1
                    block_d |= block_d >> 2
                    block_d |= block_d >> 4
                    block_d += 1
                _masked_mean_pool_kernel[(B, (D + block_d - 1) // block_d)](
                    hidden,
                    mask,
                    out,
                    S,
                    D,
                    clamp_min,
                    MODE=_SAME_KIND_MODE[mask_dtype],
                    BLOCK_D=block_d,
                )
            return out
    return _general(hidden, mask, sizes, mask_dtype, clamp_min)


def pattern(in_0, in_1, in_2, in_3, in_4):
    tmp_0 = in_1.unsqueeze(-1)
    tmp_1 = tmp_0.expand(in_2)
    tmp_2 = tmp_1.to(in_3)
    tmp_3 = in_0 * tmp_2
    tmp_4 = torch.sum(tmp_3, 1)
    tmp_5 = tmp_2.sum(1)
    tmp_6 = torch.clamp(tmp_5, min=in_4)
    tmp_7 = tmp_4 / tmp_6
    tmp_8 = torch.cat([tmp_7], 1)
    return tmp_8


def replacement_args(in_0, in_1, in_2, in_3, in_4):
    return (in_0, in_1, in_2, in_3, in_4)


def replacement_func():
    return fused_masked_mean_pooling
