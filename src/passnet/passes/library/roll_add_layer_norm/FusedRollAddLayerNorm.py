"""Swin's window roll-back + residual add + LayerNorm, two outputs, one Triton kernel.

Matches (vuiseng9_tiny-random-SwinModel, the shifted-window block; the PassNet
paper's Swin/MaskFormer case)::

    rolled = torch.roll(windows, shifts=shifts, dims=(1, 2)).view(B, H * W, C)
    hidden = residual + rolled
    out = torch.nn.functional.layer_norm(hidden, (C,), weight, bias, eps)
    return hidden, out

Eager runs three kernels (roll, add, layer_norm) and materialises the rolled
tensor. The kernel replaces the roll by index arithmetic: output position
``(h, w)`` reads input ``((h - shift_h) mod H, (w - shift_w) mod W)``. It writes
both outputs, since the sum is the residual stream of the next block. The sum is
rounded to its dtype as eager stores it before it is normalised.

The launch is most of the cost at these sizes, so the wrapper has a fast path for
the real case (contiguous operands, residual and windows of one dtype, weight and
bias given, tuple literals) and the kernel takes fourteen arguments instead of
twenty: the weight/bias flags and the sum's dtype are one constexpr ``MODE``, the
rows per program follow from the padded row length, a 2-d grid (row blocks, images)
replaces the row count, and a residual broadcast over rows is made contiguous.
"""

import torch
import triton
import triton.language as tl

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2}
# MODE of the fast path (weight and bias given): SUM_KIND + 3 * HAS_WEIGHT + 6 * HAS_BIAS.
_WEIGHT_BIAS_MODE = {torch.float32: 9, torch.float16: 10, torch.bfloat16: 11}


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
def _roll_add_layer_norm_kernel(
    x_ptr,
    r_ptr,
    w_ptr,
    bias_ptr,
    sum_ptr,
    out_ptr,
    H,
    W,
    C,
    shift_h,
    shift_w,
    eps,
    MODE: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    # MODE = SUM_KIND + 3 * HAS_WEIGHT + 6 * HAS_BIAS (dtype kinds: 0 fp32, 1 fp16, 2 bf16);
    # a program holds ~4K elements: whole rows padded to BLOCK_C (a power of two).
    SUM_KIND: tl.constexpr = MODE % 3
    HAS_WEIGHT: tl.constexpr = (MODE // 3) % 2
    HAS_BIAS: tl.constexpr = MODE // 6
    BLOCK_R: tl.constexpr = (4096 + BLOCK_C - 1) // BLOCK_C
    # grid (row blocks of an image, images): program (i, b) handles rows
    # i * BLOCK_R + [0, BLOCK_R) of the H * W rows of image b.
    b = tl.program_id(1)
    pos = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    row_ok = pos < H * W
    col_ok = cols < C
    ok = row_ok[:, None] & col_ok[None, :]
    rows = b * (H * W) + pos
    # windows: contiguous [B, H, W, C]; residual, sum and out: contiguous [B * H * W, C].
    # torch.roll: out[i] = in[(i - shift) mod n]; shifts arrive normalised to [0, n).
    src_h = (pos // W + H - shift_h) % H
    src_w = (pos % W + W - shift_w) % W
    x_off = ((b * H + src_h) * W + src_w) * C
    x = tl.load(x_ptr + x_off[:, None] + cols[None, :], mask=ok, other=0.0)
    o_off = rows[:, None] * C + cols[None, :]
    r = tl.load(r_ptr + o_off, mask=ok, other=0.0)
    s = _round(r.to(tl.float32) + x.to(tl.float32), SUM_KIND)
    tl.store(sum_ptr + o_off, s.to(sum_ptr.dtype.element_ty), mask=ok)
    mean = tl.sum(s, axis=1) / C
    diff = tl.where(ok, s - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / C
    y = diff * tl.math.rsqrt(var + eps)[:, None]
    if HAS_WEIGHT:
        y = y * tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_BIAS:
        y = y + tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + o_off, _round(y, SUM_KIND).to(out_ptr.dtype.element_ty), mask=ok)


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


def _resolve_view(sizes, numel):
    """The sizes of ``view(*sizes)`` of ``numel`` elements, with a -1 worked out."""
    known = 1
    for s in sizes:
        if s != -1:
            known *= int(s)
    return [int(s) if s != -1 else (numel // known if known else 0) for s in sizes]


def _general(
    windows, shifts, size_0, size_1, size_2, residual, normalized_shape, weight, bias, eps
):
    """Every case the fast path leaves: other layouts, broadcasts, dtypes, no weight or bias."""
    if windows.dim() != 4:
        raise ValueError(
            f"FusedRollAddLayerNorm: rolled tensor must be [B, H, W, C], got {tuple(windows.shape)}"
        )
    B, H, W, C = windows.shape
    shifts = [int(shifts)] * 2 if isinstance(shifts, int) else [int(s) for s in shifts]
    sizes = _resolve_view((size_0, size_1, size_2), windows.numel())
    if len(shifts) != 2 or sizes != [B, H * W, C]:
        raise ValueError(
            f"FusedRollAddLayerNorm expects two shifts and a view to [B, H*W, C] = {[B, H * W, C]}, "
            f"got shifts {shifts} and view {sizes}"
        )
    if list(normalized_shape) != [C] or not isinstance(eps, (int, float)):
        raise ValueError(
            f"FusedRollAddLayerNorm normalises the last dim {C}, got {list(normalized_shape)}"
        )
    if residual.dim() > 3 or any(
        rs not in (1, s) for rs, s in zip(reversed(residual.shape), reversed(sizes))
    ):
        raise ValueError(
            f"FusedRollAddLayerNorm: residual {tuple(residual.shape)} does not broadcast to {sizes}"
        )
    if windows.dtype not in _KIND or residual.dtype not in _KIND:
        raise TypeError(
            f"FusedRollAddLayerNorm supports float32/float16/bfloat16, got {windows.dtype}, {residual.dtype}"
        )
    # Few arguments keep Triton's launch short: the kernel reads contiguous tensors, a
    # broadcast residual is materialised.
    if not windows.is_contiguous():
        windows = windows.contiguous()
    if list(residual.shape) != sizes:
        residual = residual.expand(sizes)
    if not residual.is_contiguous():
        residual = residual.contiguous()
    sum_dtype = _promote(residual.dtype, windows.dtype)
    total = torch.empty((B, H * W, C), dtype=sum_dtype, device=windows.device)
    out = torch.empty((B, H * W, C), dtype=sum_dtype, device=windows.device)
    if B * H * W == 0 or C == 0:
        return total, out
    if weight is not None and not weight.is_contiguous():
        weight = weight.contiguous()
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    _check_int32_offsets(
        "FusedRollAddLayerNorm",
        ("windows", windows),
        ("residual", residual),
        ("weight", weight),
        ("bias", bias),
        ("sum", total),
        ("out", out),
    )
    block_c = _next_pow2(C)
    block_r = max(1, 4096 // block_c)  # as the kernel derives it
    _roll_add_layer_norm_kernel[((H * W + block_r - 1) // block_r, B)](
        windows,
        residual,
        weight if weight is not None else windows,
        bias if bias is not None else windows,
        total,
        out,
        H,
        W,
        C,
        shifts[0] % H,
        shifts[1] % W,
        float(eps),
        MODE=_KIND[sum_dtype] + (3 if weight is not None else 0) + (6 if bias is not None else 0),
        BLOCK_C=block_c,
        num_warps=4 if block_c <= 4096 else min(16, block_c // 512),
    )
    return total, out


@torch.fx.wrap
def fused_roll_add_layer_norm(
    windows, shifts, size_0, size_1, size_2, residual, normalized_shape, weight, bias, eps
):
    """``s = residual + roll(windows, shifts, (1, 2)).view(size_0, size_1, size_2)``.

    Returns ``(s, layer_norm(s, normalized_shape, weight, bias, eps))``.
    """
    # Fast path (the real site): windows [B, H, W, C] and residual [B, H * W, C] of one
    # dtype, weight and bias [C], all contiguous; shifts and normalized_shape tuples of
    # ints, the view's sizes given, a float eps; fewer than 2**31 elements (int32 offsets:
    # _general refuses larger tensors).
    shape = windows.shape
    dtype = windows.dtype
    if (
        type(eps) is float
        and type(shifts) is tuple
        and len(shifts) == 2
        and len(shape) == 4
        and dtype in _WEIGHT_BIAS_MODE
        and residual.dtype is dtype
        and weight is not None
        and bias is not None
        and residual.shape == (size_0, size_1, size_2)
        and size_0 == shape[0]
        and size_1 == shape[1] * shape[2]
        and size_2 == shape[3]
        and normalized_shape == (size_2,)
        and weight.shape == normalized_shape
        and bias.shape == normalized_shape
        and 0 < size_2 <= 4096
        and size_0 * size_1 * size_2 < 2**31
        and windows.is_contiguous()
        and residual.is_contiguous()
        and weight.is_contiguous()
        and bias.is_contiguous()
    ):
        total = torch.empty_like(residual)
        out = torch.empty_like(residual)
        H = shape[1]
        W = shape[2]
        if size_0 and size_1:
            # the next power of two >= C (C <= 4096), then ceil(H * W / (4096 // block_c))
            # programs of 4096 // block_c rows per image; see _next_pow2
            block_c = size_2 - 1
            block_c |= block_c >> 1
            block_c |= block_c >> 2
            block_c |= block_c >> 4
            block_c |= block_c >> 8
            block_c += 1
            _roll_add_layer_norm_kernel[((size_1 * block_c + 4095) // 4096, size_0)](
                windows,
                residual,
                weight,
                bias,
                total,
                out,
                H,
                W,
                size_2,
                shifts[0] % H,
                shifts[1] % W,
                eps,
                MODE=_WEIGHT_BIAS_MODE[dtype],
                BLOCK_C=block_c,
            )
        return total, out
    return _general(
        windows, shifts, size_0, size_1, size_2, residual, normalized_shape, weight, bias, eps
    )


def pattern(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9):
    tmp_0 = torch.roll(in_3, shifts=in_4, dims=(1, 2))
    tmp_1 = tmp_0.view(in_5, in_6, in_7)
    tmp_2 = in_2 + tmp_1
    tmp_3 = torch.nn.functional.layer_norm(tmp_2, in_8, in_1, in_0, in_9)
    return (tmp_2, tmp_3)


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9):
    return (in_3, in_4, in_5, in_6, in_7, in_2, in_8, in_1, in_0, in_9)


def replacement_func():
    return fused_roll_add_layer_norm
