"""Swin's shifted-window attention softmax with its relative-position bias gathered in the
kernel: bias gather, scale, add, window mask through views, softmax, eval-mode dropout as one
Triton kernel.

Matches (vuiseng9_tiny-random-SwinModel: the shifted block, 1 site; HF's
``SwinSelfAttention`` called with an attention mask)::

    bias = table[index.view(-1)].view(a, b, c).permute(2, 0, 1).contiguous().unsqueeze(0)
    s = (scores / divisor + bias).view(B, W, heads, N, N)
    s = s + window_mask                                         # [1, W, 1, N, N]
    probs = torch.nn.functional.softmax(s.view(-1, heads, N, N), dim=-1)
    probs = torch.nn.functional.dropout(probs, p, False, False)

The window mask (built in ``model.py`` from values that do not depend on the graph's
inputs), the view sizes, the divisor and ``p`` are pattern inputs, as in
``FusedShiftedWindowSoftmaxDropout``, which this rule extends with the bias chain of
``FusedRelPosBiasSoftmaxDropout``: eager's six bias operations (two kernels: the gather
and the permuted copy), then div, add, add, softmax and the views on the host.

The kernel is ``FusedRelPosBiasSoftmaxDropout``'s with ``HAS_MASK``: score row ``r`` of
``[B*W, heads, N, N]`` reads ``table[index[(r mod N) * N + j], (r // N) mod heads]`` and
the mask, as a contiguous ``[W, N, N]``, at row ``((r // (heads*N)) * N + r mod N) mod
(W*N)``; ``scores / divisor``, the sum with the bias and the sum with the mask are rounded
to their dtypes as eager stores them before the fp32 softmax (eager on CUDA divides by a
Python scalar as a multiplication by its fp32 reciprocal, on CPU as a true division). An
index out of range (eager raises) is not read and gives a NaN row.

The wrapper has a fast path for the real case (float divisor and ``p``, operands of one
dtype, an int64 index of N*N elements, contiguous, views that split and re-merge the
window-batch dim); the general path checks the bias as ``FusedRelPosBiasSoftmaxDropout``
does and the window views and mask as ``FusedShiftedWindowSoftmaxDropout`` does (both
helpers imported), and refuses precisely what the kernel cannot do.
"""

import math

import torch
from pass_dir.FusedRelPosBiasSoftmaxDropout import (
    _bias_layout,
    _launch,
    _rel_pos_bias_softmax_kernel,
)
from pass_dir.FusedScaleMaskSoftmax import _KIND, _next_pow2, _promote
from pass_dir.FusedShiftedWindowSoftmaxDropout import (
    _SAME_KIND_MODE,
    _check_scalars,
    _window_layout,
)

_RULE = "FusedRelPosBiasShiftedWindowSoftmaxDropout"


def _general(scores, divisor, index, table, sizes, mask, view_5d, view_4d, p):
    """Every case the fast path leaves: mixed dtypes, int divisor or p, other views, layouts."""
    _check_scalars(divisor, p, _RULE)
    if not isinstance(mask, torch.Tensor) or mask.dtype not in _KIND:
        raise TypeError(
            f"{_RULE} needs a float32/float16/bfloat16 tensor window mask, got "
            f"{mask.dtype if isinstance(mask, torch.Tensor) else repr(mask)}"
        )
    if mask.device != scores.device:
        raise ValueError(f"{_RULE} needs the window mask on the scores' device, got {mask.device}")
    shape, scores, index, table, s_i, s_j = _bias_layout(scores, index, table, sizes, _RULE)
    sum1_dtype = _promote(scores.dtype, table.dtype)
    if mask.dim() == 0 and mask.dtype != sum1_dtype:
        raise ValueError(
            f"{_RULE}: a 0-dim window mask of {mask.dtype} added to a "
            f"{sum1_dtype} sum is not supported (eager's type "
            "promotion lets a 0-dim operand defer to the other's dtype)"
        )
    out_shape, mask, P, Q = _window_layout(shape, mask, view_5d, view_4d, _RULE)
    out_dtype = _promote(sum1_dtype, mask.dtype)
    out = torch.empty(out_shape, dtype=out_dtype, device=scores.device)
    if math.prod(shape):
        mode = (
            _KIND[scores.dtype]
            + 3 * _KIND[sum1_dtype]
            + 9 * _KIND[out_dtype]
            + (27 if scores.is_cuda else 0)
        )
        _launch(scores, index, table, mask, out, shape, s_i, s_j, P, Q, divisor, mode, _RULE)
    return out


@torch.fx.wrap
def fused_rel_pos_bias_shifted_window_softmax_dropout(
    scores, divisor, index, table, a, b, c, mask, v0, v1, v2, v3, v4, w0, w1, w2, w3, p
):
    """``dropout(softmax(((scores / divisor + table[index.view(-1)].view(a, b, c)
    .permute(2, 0, 1).unsqueeze(0)).view(v0, .., v4) + mask).view(w0, .., w3), dim=-1), p,
    training=False)``."""
    # Fast path (the real site): float divisor and p, operands of one dtype, contiguous on one
    # device, scores [v0 * v1, v2, v3, v4] with v3 == v4 == a == b, table [T, v2], an int64
    # index of v4 * v4 elements, mask [1, v1, 1, v3, v4], viewed back to the scores' shape;
    # the scores and the table of fewer than 2**31 elements together (int32 offsets: _general
    # checks each and refuses the larger).
    if (
        type(divisor) is float
        and type(p) is float
        and 0.0 <= p <= 1.0
        and isinstance(index, torch.Tensor)
        and isinstance(table, torch.Tensor)
        and isinstance(mask, torch.Tensor)
    ):
        dtype = scores.dtype
        shape = scores.shape
        t_shape = table.shape
        if (
            dtype in _SAME_KIND_MODE
            and table.dtype is dtype
            and mask.dtype is dtype
            and index.dtype is torch.int64
            and v0 > 0
            and 0 < v4 <= 4096
            and shape == (v0 * v1, v2, v3, v4)
            and a == b == v3 == v4
            and (c == -1 or c == v2)
            and len(t_shape) == 2
            and t_shape[0] > 0
            and 0 < t_shape[1] == v2
            and index.numel() == v4 * v4
            and (w0 == -1 or w0 == shape[0])
            and (w1, w2, w3) == (v2, v3, v4)
            and mask.shape == (1, v1, 1, v3, v4)
            and scores.is_contiguous()
            and table.is_contiguous()
            and index.is_contiguous()
            and mask.is_contiguous()
            and index.device == scores.device == table.device == mask.device
        ):
            numel = scores.numel()
            if numel + t_shape[0] * t_shape[1] < 2**31:
                out = torch.empty_like(scores)
                n_rows = numel // v4
                if n_rows:
                    block_n = _next_pow2(v4)
                    # ceil(n_rows / (4096 // block_n)) programs of 4096 // block_n rows
                    _rel_pos_bias_softmax_kernel[((n_rows * block_n + 4095) // 4096,)](
                        scores,
                        index,
                        table,
                        mask,
                        out,
                        n_rows,
                        v4,
                        v4,
                        v4,
                        1,
                        v2,
                        t_shape[0],
                        v1 * v3,
                        v2 * v3,
                        v3,
                        divisor,
                        MODE=_SAME_KIND_MODE[dtype] + (27 if scores.is_cuda else 0),
                        HAS_MASK=True,
                        BLOCK_N=block_n,
                    )
                return out
    return _general(
        scores, divisor, index, table, (a, b, c), mask, (v0, v1, v2, v3, v4), (w0, w1, w2, w3), p
    )


def pattern(
    in_0,
    in_1,
    in_2,
    in_3,
    in_4,
    in_5,
    in_6,
    in_7,
    in_8,
    in_9,
    in_10,
    in_11,
    in_12,
    in_13,
    in_14,
    in_15,
    in_16,
    in_17,
):
    tmp_0 = in_0 / in_1
    tmp_1 = in_2.view(-1)
    tmp_2 = in_3[tmp_1]
    tmp_3 = tmp_2.view(in_4, in_5, in_6)
    tmp_4 = tmp_3.permute(2, 0, 1)
    tmp_5 = tmp_4.contiguous()
    tmp_6 = tmp_5.unsqueeze(0)
    tmp_7 = tmp_0 + tmp_6
    tmp_8 = tmp_7.view(in_8, in_9, in_10, in_11, in_12)
    tmp_9 = tmp_8 + in_7
    tmp_10 = tmp_9.view(in_13, in_14, in_15, in_16)
    tmp_11 = torch.nn.functional.softmax(tmp_10, dim=-1)
    tmp_12 = torch.nn.functional.dropout(tmp_11, in_17, False, False)
    return tmp_12


def replacement_args(
    in_0,
    in_1,
    in_2,
    in_3,
    in_4,
    in_5,
    in_6,
    in_7,
    in_8,
    in_9,
    in_10,
    in_11,
    in_12,
    in_13,
    in_14,
    in_15,
    in_16,
    in_17,
):
    return (
        in_0,
        in_1,
        in_2,
        in_3,
        in_4,
        in_5,
        in_6,
        in_7,
        in_8,
        in_9,
        in_10,
        in_11,
        in_12,
        in_13,
        in_14,
        in_15,
        in_16,
        in_17,
    )


def replacement_func():
    return fused_rel_pos_bias_shifted_window_softmax_dropout
