"""Masked mean pooling (sentence-transformers' ``mean_pooling``) as one Triton kernel.

Matches (splade-mini, the PassNet paper's BGE case)::

    m = mask.unsqueeze(-1).expand(sizes).to(dtype)
    out = torch.cat([torch.sum(hidden * m, 1) / torch.clamp(m.sum(1), min=1e-09)], 1)

Eager runs six kernels and materialises the expanded ``[B, S, D]`` float mask
twice. The kernel reads the ``[B, S]`` mask directly, keeps ``sum(mask * hidden)``
and ``sum(mask)`` in fp32 registers and writes the ``[B, D]`` result once. Every
value eager rounds to fp16/bf16 between two ops is rounded the same way here, so
the result is bitwise eager's up to the order of the fp32 sums.
"""

import torch
import triton
import triton.language as tl

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2}


def _promote(a, b):
    """torch's type promotion between two of fp32/fp16/bf16 (fp16 with bf16 gives fp32)."""
    if a == b:
        return a
    if _RANK[a] == _RANK[b]:
        return torch.float32
    return a if _RANK[a] > _RANK[b] else b


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
    MASK_KIND: tl.constexpr,
    OUT_KIND: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # hidden [B, S, D] and mask [B, S] contiguous; one program: batch row b, BLOCK_D features.
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


@torch.fx.wrap
def fused_masked_mean_pooling(hidden, mask, sizes, mask_dtype, clamp_min):
    """``sum(hidden * mask, 1) / clamp(sum(mask, 1), min)`` over ``[B, S, D]`` / ``[B, S]``."""
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
    BLOCK_D = min(triton.next_power_of_2(D), 128)
    BLOCK_S = max(1, min(triton.next_power_of_2(S), 4096 // BLOCK_D))
    _masked_mean_pool_kernel[(B, triton.cdiv(D, BLOCK_D))](
        hidden,
        mask,
        out,
        S,
        D,
        float(clamp_min),
        MASK_KIND=_KIND[mask_dtype],
        OUT_KIND=_KIND[out_dtype],
        BLOCK_S=BLOCK_S,
        BLOCK_D=BLOCK_D,
        num_warps=4,
    )
    return out


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
