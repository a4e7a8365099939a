"""Residual add + LayerNorm as one Triton kernel.

Matches (BERT-style encoders: prajjwal1_bert-tiny, ms-marco-TinyBERT-L2,
bge-small-zh, splade-mini: the embeddings' sum of position embeddings; also every
``BertSelfOutput``/``BertOutput`` where FusedLinearAddLayerNorm, applied first,
does not take it)::

    out = torch.nn.functional.layer_norm(a + b, normalized_shape, weight, bias, eps)

where the sum has no other user. Eager runs two kernels and round-trips the sum
through memory; the kernel loads both operands (an operand broadcast over leading
dims, such as ``[1, S, D]`` position embeddings over the batch, by row period),
rounds the sum to its dtype as eager stores it, and normalises whole rows held in
registers with a two-pass fp32 mean/variance.

The common case (tensors of one dtype, contiguous, the LayerNorm over the last dim,
weight and bias given) takes a fast path of a few metadata reads before the launch;
everything else is brought to that form (operands materialised, a number made a
one-row fp32 tensor, missing weight/bias made ones/zeros) by the general path.
"""

import math

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


def _broadcast_shape(a, b, rule="FusedAddLayerNorm"):
    """torch's broadcast of two shapes (a ValueError naming ``rule`` when they do not broadcast)."""
    ndim = max(len(a), len(b))
    a, b = [1] * (ndim - len(a)) + list(a), [1] * (ndim - len(b)) + list(b)
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"{rule}: shapes {a} and {b} do not broadcast")
    return [max(x, y) if x and y else 0 for x, y in zip(a, b)]


def _is_row_suffix(small, full):
    """``small`` (leading 1s dropped) is a trailing block of ``full``: broadcast by row period."""
    small = list(small)
    while small and small[0] == 1:
        small = small[1:]
    return list(full[len(full) - len(small) :]) == small


@triton.jit
def _round(x, ptr):
    # An eager fp16/bf16 op stores its result in that dtype (``ptr``'s element type):
    # round where it does. bf16 rounds to nearest-even by bit arithmetic (Triton's
    # interpreter truncates in .to()).
    if ptr.dtype.element_ty == tl.float16:
        x = x.to(tl.float16).to(tl.float32)
    elif ptr.dtype.element_ty == tl.bfloat16:
        u = x.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        x = tl.where(x != x, x, u.to(tl.float32, bitcast=True))
    return x


@triton.jit
def _add_layer_norm_kernel(
    a_ptr, b_ptr, w_ptr, bias_ptr, out_ptr, n_rows, b_rows, N, eps, BLOCK_N: tl.constexpr
):
    # a and out: contiguous [n_rows, N]; b: contiguous [b_rows, N], row r of the sum reads
    # row r % b_rows of b (b_rows == n_rows, or b broadcast over leading dims). The sum is
    # rounded to out's dtype, the promoted dtype. A program takes whole rows, about 4096
    # elements (one row when BLOCK_N > 4096): the row block needs no argument of its own.
    rows = tl.program_id(0) * ((BLOCK_N + 4095) // BLOCK_N) + tl.arange(
        0, (BLOCK_N + 4095) // BLOCK_N
    )
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ok = (rows < n_rows)[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    s = tl.load(a_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    b_offs = (rows % b_rows)[:, None] * N + cols[None, :]
    s += tl.load(b_ptr + b_offs, mask=ok, other=0.0).to(tl.float32)
    s = tl.where(ok, _round(s, out_ptr), 0.0)  # padding must not enter the statistics
    mean = tl.sum(s, axis=1) / N
    diff = tl.where(ok, s - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / N
    y = diff * tl.math.rsqrt(var + eps)[:, None]
    y = y * tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    y += tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + offs, _round(y, out_ptr).to(out_ptr.dtype.element_ty), mask=ok)


def _add_layer_norm_general(a, b, normalized_shape, weight, bias, eps):
    """Every case the fast path does not take: validate like eager and bring the operands
    to the kernel's form (contiguous, same-shape or row-periodic ``b``, weight and bias)."""
    names = ("a", "b")  # the operands as the wrapper was given them, followed through the swaps
    if not isinstance(a, torch.Tensor):
        a, b, names = b, a, ("b", "a")
    b_is_scalar = not isinstance(b, torch.Tensor)
    if not isinstance(a, torch.Tensor) or (b_is_scalar and not isinstance(b, (int, float))):
        raise TypeError(f"FusedAddLayerNorm adds tensors or a tensor and a number, got {b!r}")
    if not isinstance(eps, (int, float)):
        raise TypeError(f"FusedAddLayerNorm: eps must be a number, got {eps!r}")
    if a.dtype not in _KIND or (not b_is_scalar and b.dtype not in _KIND):
        raise TypeError(
            f"FusedAddLayerNorm supports float32/float16/bfloat16, got {a.dtype}, "
            f"{'a number' if b_is_scalar else b.dtype}"
        )
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if b_is_scalar:
        shape, sum_dtype = list(a.shape), a.dtype
    else:
        sum_dtype = _promote(a.dtype, b.dtype)
        shape = _broadcast_shape(a.shape, b.shape)
        if list(a.shape) != shape:
            a, b, names = b, a, names[::-1]  # the sum is symmetric: make a the full-size operand
    N = math.prod(ns)
    if shape[len(shape) - len(ns) :] != ns:
        raise ValueError(f"FusedAddLayerNorm: normalized_shape {ns} does not end {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and list(p.shape) != ns:
            raise ValueError(f"FusedAddLayerNorm: {name} {tuple(p.shape)} is not {ns}")
    out = torch.empty(shape, dtype=sum_dtype, device=a.device)
    n_rows = out.numel() // N if N else 0
    if n_rows == 0:
        return out
    # An operand broadcast other than over leading dims is rare in real graphs: it is
    # materialised. A number becomes one fp32 row: the kernel adds it in fp32 as eager does.
    if list(a.shape) != shape:
        a = a.expand(shape)
    a = a.contiguous()
    if b_is_scalar:
        b = torch.full((N,), float(b), dtype=torch.float32, device=a.device)
    elif not _is_row_suffix(b.shape, shape) or b.numel() % N:
        b = b.expand(shape)
    b = b.contiguous()
    weight = (
        weight.contiguous()
        if weight is not None
        else torch.ones(ns, dtype=torch.float32, device=a.device)
    )
    bias = (
        bias.contiguous()
        if bias is not None
        else torch.zeros(ns, dtype=torch.float32, device=a.device)
    )
    _check_int32_offsets(
        "FusedAddLayerNorm",
        (names[0], a),
        (names[1], b),
        ("weight", weight),
        ("bias", bias),
        ("out", out),
    )
    block_n = triton.next_power_of_2(N)
    _add_layer_norm_kernel[(triton.cdiv(n_rows, max(1, 4096 // block_n)),)](
        a,
        b,
        weight,
        bias,
        out,
        n_rows,
        max(1, b.numel() // N),
        N,
        float(eps),
        block_n,
        num_warps=4 if block_n <= 4096 else 16,
    )
    return out


@torch.fx.wrap
def fused_add_layer_norm(a, b, normalized_shape, weight, bias, eps):
    """``layer_norm(a + b, normalized_shape, weight, bias, eps)``; a or b may be a number."""
    # Fast path, the real graphs' case: one dtype, contiguous, normalized over the last
    # dim, b the same shape as a or broadcast over its first dim (position embeddings), a of
    # fewer than 2**31 elements (int32 offsets: the general path refuses larger tensors).
    if (
        isinstance(b, torch.Tensor)
        and isinstance(a, torch.Tensor)
        and a.dtype is b.dtype
        and a.dtype in _KIND
        and a.dim()
        and a.is_contiguous()
        and b.is_contiguous()
        and weight is not None
        and bias is not None
        and weight.is_contiguous()
        and bias.is_contiguous()
        and type(eps) is float
    ):
        shape = a.shape
        N = shape[-1]
        if (
            normalized_shape == (N,)
            and weight.shape == normalized_shape
            and bias.shape == normalized_shape
            and 0 < N <= 4096
            and (
                b.shape == shape
                or (b.dim() == len(shape) and b.shape[0] == 1 and b.shape[1:] == shape[1:])
            )
        ):
            numel = a.numel()
            if 0 < numel < 2**31:
                n_rows = numel // N
                out = torch.empty_like(a)
                block_n = 1 << math.frexp(N - 1)[1]  # next_power_of_2(N), exactly
                block_r = 4096 // block_n
                _add_layer_norm_kernel[((n_rows + block_r - 1) // block_r,)](
                    a, b, weight, bias, out, n_rows, b.numel() // N, N, eps, block_n
                )
                return out
    return _add_layer_norm_general(a, b, normalized_shape, weight, bias, eps)


def pattern(in_0, in_1, in_2, in_3, in_4, in_5):
    tmp_0 = in_2 + in_3
    tmp_1 = torch.nn.functional.layer_norm(tmp_0, in_4, in_1, in_0, in_5)
    return tmp_1


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5):
    return (in_2, in_3, in_4, in_1, in_0, in_5)


def replacement_func():
    return fused_add_layer_norm
