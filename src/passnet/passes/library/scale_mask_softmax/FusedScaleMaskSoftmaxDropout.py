"""Attention-score scaling + additive mask/bias + softmax + eval-mode dropout, one Triton kernel.

Matches every unshifted window attention of vuiseng9_tiny-random-SwinModel (3
sites; its shifted block adds the window mask through views, see
``FusedShiftedWindowSoftmaxDropout``) and of
yujiepan_tiny-random-swin-patch4-window7-224 (4 sites)::

    probs = torch.nn.functional.softmax(scores / divisor + mask, dim=-1)
    probs = torch.nn.functional.dropout(probs, p, False, False)

The dropout is HF's ``attention_probs`` dropout traced in eval mode
(``training=False``, ``inplace=False``, both literal in the pattern): it returns
its input, so the replacement is ``FusedScaleMaskSoftmax``'s kernel and absorbing
the dropout only saves its ~2 us of eager host time per call. ``p`` is a pattern
input (any probability); the wrapper checks it as eager does.

Eager runs three kernels over the ``[B, heads, N, N]`` scores. The kernel holds
whole rows in registers, reads a mask broadcast over leading dims by row period
(the Swin bias ``[1, heads, N, N]`` over the windows) and any other broadcast
through zero strides (BERT's padding mask ``[B, 1, 1, N]``), and rounds the scaled
scores and their sum with the mask to the scores' dtype exactly as eager stores
them: a one-ulp difference in an fp16 score would move the softmax far more than
its tolerance. Eager on CUDA divides by a Python scalar as a multiplication by its
fp32 reciprocal, on CPU as a true division; the kernel does the same on each device.

The launch is most of the cost at these sizes, so the wrapper has a fast path for
the real case (a float divisor and ``p``, contiguous scores and mask of one dtype,
the mask broadcast over the leading dim) and the kernel takes nine arguments: the
rounding dtypes and the device's division are one constexpr ``MODE``, and the rows
per program follow from the padded row length. The softmax is
``FusedScaleMaskSoftmax``'s wrapper and kernel, imported from that rule file.
"""

import torch
from pass_dir.FusedScaleMaskSoftmax import fused_scale_mask_softmax


def _check_dropout_p(p):
    """What eager's ``F.dropout`` checks of ``p`` before it returns its input in eval mode."""
    if not isinstance(p, (int, float)):
        raise TypeError(f"FusedScaleMaskSoftmaxDropout needs a numeric dropout p, got {p!r}")
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


@torch.fx.wrap
def fused_scale_mask_softmax_dropout(scores, divisor, mask, p):
    """``dropout(softmax(scores / divisor + mask, dim=-1), p, training=False)``: the softmax."""
    if type(p) is not float or not 0.0 <= p <= 1.0:
        _check_dropout_p(p)
    return fused_scale_mask_softmax(scores, divisor, mask, "FusedScaleMaskSoftmaxDropout")


def pattern(in_0, in_1, in_2, in_3):
    tmp_0 = in_0 / in_2
    tmp_1 = tmp_0 + in_1
    tmp_2 = torch.nn.functional.softmax(tmp_1, dim=-1)
    tmp_3 = torch.nn.functional.dropout(tmp_2, in_3, False, False)
    return tmp_3


def replacement_args(in_0, in_1, in_2, in_3):
    return (in_0, in_2, in_1, in_3)


def replacement_func():
    return fused_scale_mask_softmax_dropout
