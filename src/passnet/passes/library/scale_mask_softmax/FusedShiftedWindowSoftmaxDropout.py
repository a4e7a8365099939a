"""Swin's shifted-window attention softmax: scale, bias, window mask through views, softmax,
eval-mode dropout, as one Triton kernel.

Matches (vuiseng9_tiny-random-SwinModel: the shifted block, 1 site; HF's
``SwinSelfAttention`` called with an attention mask)::

    s = (scores / divisor + bias).view(B, W, heads, N, N)      # bias: [1, heads, N, N]
    s = s + window_mask                                         # [1, W, 1, N, N]
    probs = torch.nn.functional.softmax(s.view(-1, heads, N, N), dim=-1)
    probs = torch.nn.functional.dropout(probs, p, False, False)

``model.py`` builds the window mask from ``torch.zeros``, index assignments, a
``masked_fill`` and ``unsqueeze(1).unsqueeze(0)``, none of which depends on the
graph's inputs, so the traced graph holds it as a tensor constant (a ``get_attr``
of shape ``[1, W, 1, N, N]``) and the pattern takes it as an input. The view sizes,
the divisor and ``p`` are pattern inputs too; ``training=False``/``inplace=False``
stay literal (the eval dropout returns its input).

Eager runs four kernels (div, add, add, softmax) plus the views and the dropout
on the host. The kernel reads the scores ``[B*W, heads, N, N]`` as rows, the bias
by row period and the window mask, as a contiguous ``[W, N, N]``, at row
``((r // (heads*N)) * N + r % N) mod (W*N)`` (window ``(r // (heads*N)) mod W``,
query ``r mod N``); it rounds ``scores / divisor``, the sum with the bias and the
sum with the mask to their dtypes as eager stores them before the fp32 softmax.
Eager on CUDA divides by a Python scalar as a multiplication by its fp32
reciprocal, on CPU as a true division; the kernel does the same on each device.

The wrapper has a fast path for the real case (float divisor and ``p``, operands of
one dtype, contiguous, views that split and re-merge the window-batch dim); other
dtypes, layouts and broadcasts are handled by copying the bias or mask to a
contiguous layout the kernel reads with the same index arithmetic. The dtype
helpers (``_promote``, ``_broadcast_shape``, ``_next_pow2``, the ``_round`` device
function) are ``FusedScaleMaskSoftmax``'s, imported from that rule file; the row
arithmetic (``_window_softmax_rows``) and the views' and mask's checks
(``_window_layout``) are shared with ``FusedRelPosBiasShiftedWindowSoftmaxDropout``.
"""

import math

import torch
import triton
import triton.language as tl
from pass_dir.FusedScaleMaskSoftmax import (
    _broadcast_shape,
    _check_int32_offsets,
    _check_zero_dim,
    _next_pow2,
    _promote,
    _round,
)

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
# MODE of the fast path (all of one dtype): SCORE_KIND + 3 * SUM1_KIND + 9 * SUM2_KIND.
_SAME_KIND_MODE = {torch.float32: 0, torch.float16: 13, torch.bfloat16: 26}
_RULE = "FusedShiftedWindowSoftmaxDropout"


def _check_scalars(divisor, p, rule):
    """What eager checks of the divisor and of the eval dropout's ``p``."""
    if not isinstance(divisor, (int, float)) or not isinstance(p, (int, float)):
        raise TypeError(f"{rule} needs a numeric divisor and dropout p, got {divisor!r} and {p!r}")
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _resolve_view(sizes, numel, rule="FusedShiftedWindowSoftmaxDropout"):
    """The sizes of ``view(*sizes)`` of ``numel`` elements, with a -1 worked out."""
    known = 1
    for s in sizes:
        if s != -1:
            known *= int(s)
    sizes = [int(s) if s != -1 else (numel // known if known else 0) for s in sizes]
    if math.prod(sizes) != numel:
        raise ValueError(f"{rule}: cannot view {numel} elements as {sizes}")
    return sizes


def _window_layout(shape, mask, view_5d, view_4d, rule="FusedShiftedWindowSoftmaxDropout"):
    """How the kernel reads the window mask added to ``s.view(*view_5d)``, ``s`` the sum of the
    scaled scores and the bias (of broadcast ``shape``), and the output's ``view(*view_4d)``.

    Returns ``(out_shape, mask, P, Q)``: the mask as a contiguous ``[W, NR, N]`` read at row
    ``((r // P) * Q + r % Q) mod (W * NR)`` when it is constant over the batch and the heads
    (as Swin's), else expanded to the 5-d view and copied, read row by row (``P = Q = 1``).
    """
    n = math.prod(shape)
    view = _resolve_view(view_5d, n, rule)
    _, W, H, NR, N = view
    out_shape = _resolve_view(view_4d, n, rule)
    m_sizes = [1] * (5 - mask.dim()) + list(mask.shape)
    # The softmax rows must be the rows of every view, and the mask must not enlarge the
    # 5-d view it is added to (the output would not be the scores' rows).
    if (
        not shape
        or shape[-1] != N
        or out_shape[-1] != N
        or len(m_sizes) != 5
        or any(ms not in (1, s) for ms, s in zip(m_sizes, view))
    ):
        raise ValueError(
            f"{rule}: unsupported views: scores {tuple(shape)} viewed as {view} plus a mask "
            f"{tuple(mask.shape)}, viewed as {out_shape}"
        )
    if m_sizes[0] == 1 and m_sizes[2] == 1 and m_sizes[4] == N:
        mask = mask.reshape(m_sizes[1], m_sizes[3], N).expand(W, NR, N)
        P, Q = H * NR, NR
    else:
        mask = mask.expand(view)
        P, Q = 1, 1
    if not mask.is_contiguous():
        mask = mask.contiguous()
    return out_shape, mask, P, Q


@triton.jit
def _window_softmax_rows(x, b, m, row_ok, col_ok, divisor, MODE: tl.constexpr):
    # softmax((x / divisor + b) + m) over rows of fp32 values, rounded where eager stores.
    # MODE = SCORE_KIND + 3 * SUM1_KIND + 9 * SUM2_KIND + 27 * RECIPROCAL.
    SCORE_KIND: tl.constexpr = MODE % 3
    SUM1_KIND: tl.constexpr = (MODE // 3) % 3
    SUM2_KIND: tl.constexpr = (MODE // 9) % 3
    RECIPROCAL: tl.constexpr = MODE // 27
    # The divisor arrives as fp32, as eager converts the Python scalar to the op's math type.
    if RECIPROCAL:
        x = x * tl.math.div_rn(1.0, divisor)
    else:
        x = tl.math.div_rn(x, divisor)
    z = _round(_round(_round(x, SCORE_KIND) + b, SUM1_KIND) + m, SUM2_KIND)
    z = tl.where(col_ok[None, :], z, float("-inf"))  # padding drops out of the softmax
    z = tl.where(row_ok[:, None], z, 0.0)  # rows past the end stay finite (never stored)
    e = tl.exp(z - tl.max(z, axis=1)[:, None])
    return _round(e / tl.sum(e, axis=1)[:, None], SUM2_KIND)


@triton.jit
def _shifted_window_softmax_kernel(
    x_ptr,
    b_ptr,
    m_ptr,
    out_ptr,
    n_rows,
    b_rows,
    m_rows,
    P,
    Q,
    N,
    divisor,
    MODE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # scores and out: contiguous [n_rows, N] = [B*W, heads, NR, N];
    # bias: contiguous [b_rows, N], row r reads bias row r % b_rows;
    # window mask: contiguous [m_rows, N], row r reads mask row ((r // P) * Q + r % Q) % m_rows:
    # a [W, NR, N] mask with P = heads * NR, Q = NR (window (r // P) mod W, query r mod NR),
    # or a mask of every row with P = Q = 1.
    BLOCK_R: tl.constexpr = (4096 + BLOCK_N - 1) // BLOCK_N  # ~4K elements: whole rows
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < N
    ok = row_ok[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    b_offs = (rows % b_rows)[:, None] * N + cols[None, :]
    b = tl.load(b_ptr + b_offs, mask=ok, other=0.0).to(tl.float32)
    m_row = ((rows // P) * Q + rows % Q) % m_rows
    m = tl.load(m_ptr + m_row[:, None] * N + cols[None, :], mask=ok, other=0.0).to(tl.float32)
    y = _window_softmax_rows(x, b, m, row_ok, col_ok, divisor, MODE)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=ok)


def _general(scores, divisor, bias, mask, view_5d, view_4d, p):
    """Every case the fast path leaves: mixed dtypes, int divisor or p, other broadcasts, layouts."""
    _check_scalars(divisor, p, _RULE)
    if not isinstance(bias, torch.Tensor) or not isinstance(mask, torch.Tensor):
        raise TypeError("FusedShiftedWindowSoftmaxDropout needs a tensor bias and window mask")
    if scores.dtype not in _KIND or bias.dtype not in _KIND or mask.dtype not in _KIND:
        raise TypeError(
            "FusedShiftedWindowSoftmaxDropout supports float32/float16/bfloat16, got "
            f"{scores.dtype}, {bias.dtype}, {mask.dtype}"
        )
    _check_zero_dim(scores, bias, ("scores", "bias"), _RULE)
    sum1_dtype = _promote(scores.dtype, bias.dtype)
    if (scores.dim() == 0 and bias.dim() == 0) != (mask.dim() == 0) and mask.dtype != sum1_dtype:
        raise ValueError(
            f"{_RULE}: a 0-dim {'sum' if mask.dim() else 'mask'} of "
            f"{sum1_dtype if mask.dim() else mask.dtype} with a "
            f"{mask.dtype if mask.dim() else sum1_dtype} {'mask' if mask.dim() else 'sum'} is "
            "not supported (eager's type promotion lets a 0-dim operand defer to the other's "
            "dtype)"
        )
    out_dtype = _promote(sum1_dtype, mask.dtype)
    shape = list(scores.shape)
    if bias.shape != scores.shape:
        shape = _broadcast_shape(scores.shape, bias.shape)
        if shape != list(scores.shape):  # rare: the bias is the larger operand
            scores = scores.expand(shape)
    out_shape, mask, P, Q = _window_layout(shape, mask, view_5d, view_4d)
    out = torch.empty(out_shape, dtype=out_dtype, device=scores.device)
    n = math.prod(shape)
    if n == 0:
        return out
    N = shape[-1]
    if not scores.is_contiguous():
        scores = scores.contiguous()
    # Few arguments keep Triton's launch short: the bias by row period when it broadcasts
    # over leading dims only (other layouts are copied), the mask as _window_layout has it.
    trailing = list(bias.shape)
    while trailing and trailing[0] == 1:
        trailing = trailing[1:]
    if not (trailing and trailing == shape[len(shape) - len(trailing) :]):
        bias = bias.expand(shape)
    if not bias.is_contiguous():
        bias = bias.contiguous()
    n_rows = n // N
    block_n = _next_pow2(N)
    block_r = max(1, 4096 // block_n)  # as the kernel derives it
    mode = (
        _KIND[scores.dtype]
        + 3 * _KIND[sum1_dtype]
        + 9 * _KIND[out_dtype]
        + (27 if scores.is_cuda else 0)
    )
    _check_int32_offsets(_RULE, ("scores", scores), ("bias", bias), ("mask", mask), ("out", out))
    _shifted_window_softmax_kernel[((n_rows + block_r - 1) // block_r,)](
        scores,
        bias,
        mask,
        out,
        n_rows,
        bias.numel() // N,
        mask.numel() // N,
        P,
        Q,
        N,
        float(divisor),
        MODE=mode,
        BLOCK_N=block_n,
        num_warps=4 if block_n <= 4096 else min(16, block_n // 512),
    )
    return out


@torch.fx.wrap
def fused_shifted_window_softmax_dropout(
    scores, divisor, bias, mask, v0, v1, v2, v3, v4, w0, w1, w2, w3, p
):
    """``dropout(softmax(((scores / divisor + bias).view(v0, .., v4) + mask)
    .view(w0, .., w3), dim=-1), p, training=False)``."""
    # Fast path (the real site): float divisor and p, operands of one dtype, contiguous,
    # scores [v0 * v1, v2, v3, v4], bias [1, v2, v3, v4], mask [1, v1, 1, v3, v4], viewed
    # back to the scores' shape, the scores of fewer than 2**31 elements (int32 offsets:
    # _general refuses larger tensors).
    if type(divisor) is float and type(p) is float and isinstance(mask, torch.Tensor):
        dtype = scores.dtype
        shape = scores.shape
        if (
            dtype in _SAME_KIND_MODE
            and 0.0 <= p <= 1.0
            and isinstance(bias, torch.Tensor)
            and bias.dtype is dtype
            and mask.dtype is dtype
            and v0 > 0
            and 0 < v4 <= 4096
            and shape == (v0 * v1, v2, v3, v4)
            and (w0 == -1 or w0 == shape[0])
            and (w1, w2, w3) == (v2, v3, v4)
            and bias.shape == (1, v2, v3, v4)
            and mask.shape == (1, v1, 1, v3, v4)
            and scores.is_contiguous()
            and bias.is_contiguous()
            and mask.is_contiguous()
        ):
            numel = scores.numel()
            if numel < 2**31:
                out = torch.empty_like(scores)
                n_rows = numel // v4
                if n_rows:
                    # the next power of two >= v4 (<= 4096), then ceil(n_rows / (4096 // block_n))
                    # programs of 4096 // block_n rows; see _next_pow2
                    block_n = v4 - 1
                    block_n |= block_n >> 1
                    block_n |= block_n >> 2
                    block_n |= block_n >> 4
                    block_n |= block_n >> 8
                    block_n += 1
                    _shifted_window_softmax_kernel[((n_rows * block_n + 4095) // 4096,)](
                        scores,
                        bias,
                        mask,
                        out,
                        n_rows,
                        v2 * v3,
                        v1 * v3,
                        v2 * v3,
                        v3,
                        v4,
                        divisor,
                        MODE=_SAME_KIND_MODE[dtype] + (27 if scores.is_cuda else 0),
                        BLOCK_N=block_n,
                    )
                return out
    return _general(scores, divisor, bias, mask, (v0, v1, v2, v3, v4), (w0, w1, w2, w3), p)


def pattern(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9, in_10, in_11, in_12, in_13):
    tmp_0 = in_0 / in_2
    tmp_1 = tmp_0 + in_1
    tmp_2 = tmp_1.view(in_4, in_5, in_6, in_7, in_8)
    tmp_3 = tmp_2 + in_3
    tmp_4 = tmp_3.view(in_9, in_10, in_11, in_12)
    tmp_5 = torch.nn.functional.softmax(tmp_4, dim=-1)
    tmp_6 = torch.nn.functional.dropout(tmp_5, in_13, False, False)
    return tmp_6


def replacement_args(
    in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9, in_10, in_11, in_12, in_13
):
    return (in_0, in_2, in_1, in_3, in_4, in_5, in_6, in_7, in_8, in_9, in_10, in_11, in_12, in_13)


def replacement_func():
    return fused_shifted_window_softmax_dropout
