"""Swin's shifted-window merge: window reverse + roll back + residual add + LayerNorm, two outputs.

Matches the shifted Swin block's attention output (vuiseng9_tiny-random-SwinModel:
1 site; the PassNet paper's Swin/MaskFormer roll case with the window merge before
it)::

    h = torch.nn.functional.dropout(attn_out, p, False, False)     # [B*nH*nW, WH*WW, C]
    h = h.view(-1, WH, WW, C).view(-1, nH, nW, WH, WW, C)
    h = h.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)
    h = torch.roll(h, shifts=shifts, dims=(1, 2))
    hidden = residual + h.view(B, H * W, C)
    out = torch.nn.functional.layer_norm(hidden, (C,), weight, bias, eps)
    return hidden, out

Eager runs four kernels (the window-merging copy, roll, add, layer_norm) and seven
view/permute/dropout calls on the host. The replacement is
``FusedWindowReverseAddLayerNorm``'s wrapper and kernel with the shifts: the kernel
undoes the roll and the window layout in one index computation, so neither the
merged nor the rolled tensor is materialised.
"""

import torch
from pass_dir.FusedWindowReverseAddLayerNorm import fused_window_reverse_add_layer_norm


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
    in_24,
):
    tmp_0 = torch.nn.functional.dropout(in_3, in_4, False, False)
    tmp_1 = tmp_0.view(in_5, in_6, in_7, in_8)
    tmp_2 = tmp_1.view(in_9, in_10, in_11, in_12, in_13, in_14)
    tmp_3 = tmp_2.permute(0, 1, 3, 2, 4, 5)
    tmp_4 = tmp_3.contiguous()
    tmp_5 = tmp_4.view(in_15, in_16, in_17, in_18)
    tmp_6 = torch.roll(tmp_5, shifts=in_19, dims=(1, 2))
    tmp_7 = tmp_6.view(in_20, in_21, in_22)
    tmp_8 = in_2 + tmp_7
    tmp_9 = torch.nn.functional.layer_norm(tmp_8, in_23, in_1, in_0, in_24)
    return (tmp_8, tmp_9)


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
    in_24,
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
        in_19,
        in_20,
        in_21,
        in_22,
        in_2,
        in_23,
        in_1,
        in_0,
        in_24,
    )


def replacement_func():
    return fused_window_reverse_add_layer_norm
