"""Attention-score scaling + additive mask/bias + softmax as one Triton kernel.

Matches the scaled, masked attention softmax (the same shape as BERT's explicit
``scores / sqrt(d) + mask -> softmax``). In the Swin samples every one is followed
by an eval-mode dropout, so ``FusedScaleMaskSoftmaxDropout``, loaded first, takes
all their sites; this rule covers a softmax without that dropout::

    probs = torch.nn.functional.softmax(scores / divisor + mask, dim=-1)

Eager runs three kernels over the ``[B, heads, N, N]`` scores. The kernel holds
whole rows in registers, reads a mask broadcast over leading dims by row period
(the Swin bias ``[1, heads, N, N]`` over the windows) and any other broadcast
through zero strides (BERT's padding mask ``[B, 1, 1, N]``), and rounds the scaled
scores and their sum with the mask to the scores' dtype exactly as eager stores
them: a one-ulp difference in an fp16 score would move the softmax far more than
its tolerance. Eager on CUDA divides by a Python scalar as a multiplication by its
fp32 reciprocal, on CPU as a true division; the kernel does the same on each device.

The launch is most of the cost at these sizes, so the wrapper has a fast path for
the real case (a float divisor, contiguous scores and mask of one dtype, the mask
broadcast over the leading dim) and the kernel takes nine arguments: the rounding
dtypes and the device's division are one constexpr ``MODE``, and the rows per
program follow from the padded row length.
"""

import math

import torch
import triton
import triton.language as tl

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2}
# MODE of the fast path (scores, sum and output of one dtype): SCORE_KIND + 3 * SUM_KIND.
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


def _check_zero_dim(a, b, names, rule):
    """Refuse a 0-dim operand of a dtype other than the dimensioned one's: eager's promotion
    then takes the dimensioned operand's dtype (and rounds the 0-dim one to it first), which
    ``_promote`` and the kernels' rounding points do not model."""
    if (a.dim() == 0) != (b.dim() == 0) and a.dtype != b.dtype:
        zero, other = (names[0], names[1]) if a.dim() == 0 else (names[1], names[0])
        raise ValueError(
            f"{rule}: a 0-dim {zero} of {(a if a.dim() == 0 else b).dtype} with a "
            f"{(b if a.dim() == 0 else a).dtype} {other} is not supported (eager's type "
            "promotion lets a 0-dim operand defer to the other's dtype)"
        )


def _broadcast_shape(*shapes):
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return out


def _row_layout(t, shape, n_inner):
    """How to read ``t`` broadcast to ``shape`` as rows of its last ``n_inner`` dims.

    Returns ``(t, strides of the leading dims, column stride)``; the column stride
    is 1 for a contiguous row block and 0 for an operand broadcast along the row.
    """
    pad = len(shape) - t.dim()
    sizes = [1] * pad + list(t.shape)
    strides = [0] * pad + list(t.stride())
    strides = [0 if sz == 1 else st for sz, st in zip(sizes, strides)]
    inner_sizes, inner_strides = sizes[len(shape) - n_inner :], strides[len(shape) - n_inner :]
    if all(st == 0 for st in inner_strides):
        col_stride = 0
    elif inner_sizes == list(shape[len(shape) - n_inner :]):
        expected, contiguous = 1, True
        for sz, st in zip(reversed(inner_sizes), reversed(inner_strides)):
            if sz != 1 and st != expected:
                contiguous = False
            expected *= sz
        if not contiguous:
            return _row_layout(t.contiguous(), shape, n_inner)
        col_stride = 1
    else:
        raise ValueError(
            f"an operand of shape {tuple(t.shape)} is broadcast inside the normalized "
            f"dims of {tuple(shape)}"
        )
    return t, strides[: len(shape) - n_inner], col_stride


def _collapse(lead, operand_strides):
    """Merge leading dims until at most three remain (the kernel indexes three)."""
    lead = list(lead)
    operand_strides = [list(s) for s in operand_strides]
    i = len(lead) - 2
    while len(lead) > 3 and i >= 0:
        if all(s[i] == s[i + 1] * lead[i + 1] for s in operand_strides):
            lead[i : i + 2] = [lead[i] * lead[i + 1]]
            for s in operand_strides:
                s[i : i + 2] = [s[i + 1]]
        i -= 1
    if len(lead) > 3:
        raise ValueError(f"cannot index leading dims {lead} as three dims")
    lead = [1] * (3 - len(lead)) + lead
    operand_strides = [[0] * (3 - len(s)) + s for s in operand_strides]
    return lead, operand_strides


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
def _softmax_rows(x, m, row_ok, col_ok, divisor, MODE: tl.constexpr):
    # MODE = SCORE_KIND + 3 * SUM_KIND + 9 * RECIPROCAL (dtype kinds: 0 fp32, 1 fp16, 2 bf16).
    SCORE_KIND: tl.constexpr = MODE % 3
    SUM_KIND: tl.constexpr = (MODE // 3) % 3
    RECIPROCAL: tl.constexpr = MODE // 9
    # The divisor arrives as fp32, as eager converts the Python scalar to the op's math type.
    if RECIPROCAL:
        x = x * tl.math.div_rn(1.0, divisor)
    else:
        x = tl.math.div_rn(x, divisor)
    z = _round(_round(x, SCORE_KIND) + m, SUM_KIND)
    z = tl.where(col_ok[None, :], z, float("-inf"))  # padding drops out of the softmax
    z = tl.where(row_ok[:, None], z, 0.0)  # rows past the end stay finite (never stored)
    e = tl.exp(z - tl.max(z, axis=1)[:, None])
    return _round(e / tl.sum(e, axis=1)[:, None], SUM_KIND)


@triton.jit
def _scale_mask_softmax_kernel(
    x_ptr, m_ptr, out_ptr, n_rows, m_rows, N, divisor, MODE: tl.constexpr, BLOCK_N: tl.constexpr
):
    # scores and out: contiguous [n_rows, N]; mask: contiguous [m_rows, N], row r reads mask
    # row r % m_rows (the mask broadcast over leading dims, like Swin's [1, heads, N, N]).
    # A program holds ~4K elements: whole rows padded to BLOCK_N (a power of two).
    BLOCK_R: tl.constexpr = (4096 + BLOCK_N - 1) // BLOCK_N
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < N
    ok = row_ok[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    m_offs = (rows % m_rows)[:, None] * N + cols[None, :]
    m = tl.load(m_ptr + m_offs, mask=ok, other=0.0).to(tl.float32)
    y = _softmax_rows(x, m, row_ok, col_ok, divisor, MODE)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _scale_strided_mask_softmax_kernel(
    x_ptr,
    m_ptr,
    out_ptr,
    n_rows,
    N,
    d1,
    d2,
    m_s0,
    m_s1,
    m_s2,
    m_sc,
    divisor,
    MODE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # As above, with the mask read through (zero) strides of three leading dims
    # (d0, d1, d2): BERT's padding mask [B, 1, 1, S] over scores [B, heads, S, S].
    BLOCK_R: tl.constexpr = (4096 + BLOCK_N - 1) // BLOCK_N
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < N
    ok = row_ok[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    m_off = (rows // (d1 * d2)) * m_s0 + ((rows // d2) % d1) * m_s1 + (rows % d2) * m_s2
    m = tl.load(m_ptr + m_off[:, None] + cols[None, :] * m_sc, mask=ok, other=0.0).to(tl.float32)
    y = _softmax_rows(x, m, row_ok, col_ok, divisor, MODE)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=ok)


def _general(scores, divisor, mask, rule):
    """Every case the fast path leaves: mixed dtypes, int divisor, other broadcasts, layouts,
    and tensors the kernels' int32 offsets cannot address (refused). ``rule`` names the rule
    in errors (FusedScaleMaskSoftmaxDropout calls this rule's wrapper)."""
    if not isinstance(divisor, (int, float)) or not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{rule} needs a numeric divisor and a tensor mask, got "
            f"{divisor!r} and a {'tensor' if isinstance(mask, torch.Tensor) else repr(mask)}"
        )
    if scores.dtype not in _KIND or mask.dtype not in _KIND:
        raise TypeError(
            f"{rule} supports float32/float16/bfloat16, got {scores.dtype}, {mask.dtype}"
        )
    _check_zero_dim(scores, mask, ("scores", "mask"), rule)
    out_dtype = _promote(scores.dtype, mask.dtype)
    shape = list(scores.shape)
    if mask.shape != scores.shape:
        shape = _broadcast_shape(scores.shape, mask.shape)
        if shape != list(scores.shape):  # rare: the mask is the larger operand
            scores = scores.expand(shape)
    if not scores.is_contiguous():
        scores = scores.contiguous()
    out = torch.empty(shape, dtype=out_dtype, device=scores.device)
    N = shape[-1]
    n_rows = math.prod(shape[:-1])
    if n_rows == 0 or N == 0:
        return out
    block_n = _next_pow2(N)
    block_r = max(1, 4096 // block_n)  # as the kernel derives it
    grid = ((n_rows + block_r - 1) // block_r,)
    num_warps = 4 if block_n <= 4096 else min(16, block_n // 512)
    mode = _KIND[scores.dtype] + 3 * _KIND[out_dtype] + (9 if scores.is_cuda else 0)
    trailing = list(mask.shape)
    while trailing and trailing[0] == 1:
        trailing = trailing[1:]
    if trailing and trailing == shape[len(shape) - len(trailing) :] and mask.is_contiguous():
        _check_int32_offsets(rule, ("scores", scores), ("mask", mask), ("out", out))
        _scale_mask_softmax_kernel[grid](
            scores,
            mask,
            out,
            n_rows,
            mask.numel() // N,
            N,
            float(divisor),
            MODE=mode,
            BLOCK_N=block_n,
            num_warps=num_warps,
        )
        return out
    m, m_lead, m_sc = _row_layout(mask, shape, 1)
    lead, (m_lead,) = _collapse(shape[:-1], [m_lead])
    # m is read through its strides: the largest offset they reach must fit too
    _check_int32_offsets(rule, ("scores", scores), ("mask", m), ("out", out))
    _scale_strided_mask_softmax_kernel[grid](
        scores,
        m,
        out,
        n_rows,
        N,
        lead[1],
        lead[2],
        *m_lead,
        m_sc,
        float(divisor),
        MODE=mode,
        BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return out


@torch.fx.wrap
def fused_scale_mask_softmax(scores, divisor, mask, rule="FusedScaleMaskSoftmax"):
    """``softmax(scores / divisor + mask, dim=-1)`` with ``divisor`` a number; ``rule``, the
    rule named in errors (FusedScaleMaskSoftmaxDropout passes its own)."""
    # Fast path (every site of the Swin samples): float divisor, scores and mask of one
    # dtype, both contiguous, the mask of the scores' shape or broadcast over dim 0, the
    # scores of fewer than 2**31 elements (int32 offsets: _general refuses larger tensors).
    if type(divisor) is float and isinstance(mask, torch.Tensor):
        dtype = scores.dtype
        shape = scores.shape
        m_shape = mask.shape
        if (
            dtype in _SAME_KIND_MODE
            and mask.dtype is dtype
            and len(m_shape) == len(shape) > 0
            and m_shape[1:] == shape[1:]
            and (m_shape[0] == 1 or m_shape[0] == shape[0])
            and 0 < shape[-1] <= 4096
            and scores.is_contiguous()
            and mask.is_contiguous()
        ):
            numel = scores.numel()
            if numel < 2**31:
                out = torch.empty_like(scores)
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
                    _scale_mask_softmax_kernel[((n_rows * block_n + 4095) // 4096,)](
                        scores,
                        mask,
                        out,
                        n_rows,
                        mask.numel() // N,
                        N,
                        divisor,
                        MODE=_SAME_KIND_MODE[dtype] + (9 if scores.is_cuda else 0),
                        BLOCK_N=block_n,
                    )
                return out
    return _general(scores, divisor, mask, rule)


def pattern(in_0, in_1, in_2):
    tmp_0 = in_0 / in_2
    tmp_1 = tmp_0 + in_1
    tmp_2 = torch.nn.functional.softmax(tmp_1, dim=-1)
    return tmp_2


def replacement_args(in_0, in_1, in_2):
    return (in_0, in_2, in_1)


def replacement_func():
    return fused_scale_mask_softmax
