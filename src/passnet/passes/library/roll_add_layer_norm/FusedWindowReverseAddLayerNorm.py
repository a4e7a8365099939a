"""Swin's window merge (window reverse) + residual add + LayerNorm, two outputs, one Triton kernel.

Matches every unshifted Swin block's attention output (vuiseng9_tiny-random-SwinModel:
3 sites; its shifted block, which also rolls, is ``FusedWindowReverseRollAddLayerNorm``)::

    h = torch.nn.functional.dropout(attn_out, p, False, False)     # [B*nH*nW, WH*WW, C]
    h = h.view(-1, WH, WW, C).view(-1, nH, nW, WH, WW, C)
    h = h.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)
    hidden = residual + h.view(B, H * W, C)
    out = torch.nn.functional.layer_norm(hidden, (C,), weight, bias, eps)
    return hidden, out

Eager runs three kernels (the ``contiguous`` copy that merges the windows, the add
and layer_norm) and six view/permute/dropout calls on the host; that is why this
pattern starts at the attention output's eval-mode dropout (``training=False`` is
literal: it returns its input; ``p`` is checked as eager checks it). The kernel is
``FusedRollAddLayerNorm``'s with the window layout in its index arithmetic: output
row ``(b, y, x)`` reads row ``((b * nH + y // WH) * nW + x // WW) * WH * WW +
(y % WH) * WW + x % WW`` of the attention output, so the merged tensor is never
materialised. Both outputs are written: the sum is the next block's residual.

The wrapper's fast path is integer arithmetic on the view sizes: it works out each
``-1``, and requires that the last two views merge exactly the window dims (``H =
nH * WH``, ``W = nW * WW``, then ``H * W`` rows) and the fast path's layout and
dtypes (contiguous operands of one dtype, weight and bias given, ``C <= 4096``).
Anything else runs the same views and ``.contiguous()`` and calls
``FusedRollAddLayerNorm``'s wrapper, whose general path handles broadcasts, other
dtypes and missing weight or bias; a view that does not fit its tensor raises
eager's own error there.
"""

import torch
from pass_dir.FusedRollAddLayerNorm import (
    _WEIGHT_BIAS_MODE,
    _next_pow2,
    _roll_add_layer_norm_kernel,
    fused_roll_add_layer_norm,
)


def _check_dropout_p(p):
    """What eager's ``F.dropout`` checks of ``p`` before it returns its input in eval mode."""
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _view_sizes(sizes, numel):
    """``view(*sizes)`` of ``numel`` elements with its ``-1`` worked out; None where the
    sizes are not plain ints or do not fit (the general path then lets eager's view raise)."""
    known = 1
    free = -1
    for i, s in enumerate(sizes):
        if type(s) is not int or s < -1:
            return None
        if s == -1:
            if free >= 0:
                return None
            free = i
        else:
            known *= s
    if free < 0:
        return sizes if known == numel else None
    if known == 0 or numel % known:
        return None
    return sizes[:free] + (numel // known,) + sizes[free + 1 :]


@torch.fx.wrap
def fused_window_reverse_add_layer_norm(
    attn_out,
    p,
    a0,
    a1,
    a2,
    a3,
    b0,
    b1,
    b2,
    b3,
    b4,
    b5,
    c0,
    c1,
    c2,
    c3,
    shifts,
    d0,
    d1,
    d2,
    residual,
    normalized_shape,
    weight,
    bias,
    eps,
):
    """``s = residual + roll(window_merge(attn_out), shifts, (1, 2)).view(d0, d1, d2)``.

    ``window_merge`` is ``attn_out.view(a*).view(b*).permute(0, 1, 3, 2, 4, 5)
    .contiguous().view(c*)``; returns ``(s, layer_norm(s, normalized_shape, weight, bias,
    eps))``. The unshifted rule passes ``shifts=(0, 0)``.
    """
    _check_dropout_p(p)
    n = attn_out.numel()
    dtype = attn_out.dtype
    win = _view_sizes((b0, b1, b2, b3, b4, b5), n)
    img = _view_sizes((c0, c1, c2, c3), n)
    rows = _view_sizes((d0, d1, d2), n)
    if (
        win is not None
        and img is not None
        and rows is not None
        and _view_sizes((a0, a1, a2, a3), n) is not None
        and img == (win[0], win[1] * win[3], win[2] * win[4], win[5])
        and rows == (img[0], img[1] * img[2], img[3])
        and type(eps) is float
        and type(shifts) is tuple
        and len(shifts) == 2
        and type(shifts[0]) is int
        and type(shifts[1]) is int
        and dtype in _WEIGHT_BIAS_MODE
        and residual.dtype is dtype
        and weight is not None
        and bias is not None
        and residual.shape == rows
        and normalized_shape == (rows[2],)
        and weight.shape == normalized_shape
        and bias.shape == normalized_shape
        and 0 < rows[2] <= 4096
        and attn_out.is_contiguous()
        and residual.is_contiguous()
        and weight.is_contiguous()
        and bias.is_contiguous()
    ):
        total = torch.empty_like(residual)
        out = torch.empty_like(residual)
        B, H, W, C = img
        if B and H and W:
            block_c = _next_pow2(C)
            _roll_add_layer_norm_kernel[((H * W * block_c + 4095) // 4096, B)](
                attn_out,
                residual,
                weight,
                bias,
                total,
                out,
                H,
                W,
                C,
                win[3],
                win[4],
                shifts[0] % H,
                shifts[1] % W,
                eps,
                MODE=_WEIGHT_BIAS_MODE[dtype],
                BLOCK_C=block_c,
            )
        return total, out
    merged = (
        attn_out.view(a0, a1, a2, a3)
        .view(b0, b1, b2, b3, b4, b5)
        .permute(0, 1, 3, 2, 4, 5)
        .contiguous()
        .view(c0, c1, c2, c3)
    )
    return fused_roll_add_layer_norm(
        merged, shifts, d0, d1, d2, residual, normalized_shape, weight, bias, eps
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
    in_18,
    in_19,
    in_20,
    in_21,
    in_22,
    in_23,
):
    tmp_0 = torch.nn.functional.dropout(in_3, in_4, False, False)
    tmp_1 = tmp_0.view(in_5, in_6, in_7, in_8)
    tmp_2 = tmp_1.view(in_9, in_10, in_11, in_12, in_13, in_14)
    tmp_3 = tmp_2.permute(0, 1, 3, 2, 4, 5)
    tmp_4 = tmp_3.contiguous()
    tmp_5 = tmp_4.view(in_15, in_16, in_17, in_18)
    tmp_6 = tmp_5.view(in_19, in_20, in_21)
    tmp_7 = in_2 + tmp_6
    tmp_8 = torch.nn.functional.layer_norm(tmp_7, in_22, in_1, in_0, in_23)
    return (tmp_7, tmp_8)


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
    in_18,
    in_19,
    in_20,
    in_21,
    in_22,
    in_23,
):
    return (
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
        in_18,
        (0, 0),
        in_19,
        in_20,
        in_21,
        in_2,
        in_22,
        in_1,
        in_0,
        in_23,
    )


def replacement_func():
    return fused_window_reverse_add_layer_norm
