"""Linear + eval-mode dropout + residual add + LayerNorm as one Triton kernel.

Matches the ``BertSelfOutput``/``BertOutput`` block of BERT-style encoders
(prajjwal1_bert-tiny, ms-marco-TinyBERT-L2, bge-small-zh, splade-mini)::

    h = torch._C._nn.linear(x, weight, bias)
    h = torch.nn.functional.dropout(h, p, False, False)   # eval: the identity
    out = torch.nn.functional.layer_norm(h + residual, normalized_shape, ln_weight, ln_bias, eps)

Eager runs the GEMM, the dropout call (no kernel, but its host cost), the add and
the LayerNorm. The kernel computes ``x @ weight.T`` for 16 rows of ``x`` and the
whole hidden size at once (fp32 accumulation over K; for fp32 inputs three TF32
tensor-core products per tile, ``tf32x3``, which recover fp32 accuracy, as eager
uses no TF32), adds the bias and rounds to x's dtype where eager
stores the linear result, adds the residual and rounds to the sum's dtype where
eager stores the sum, and normalises the rows, still in registers, with a two-pass
fp32 mean/variance.

One program computes a whole row block, so it reads the whole weight on one SM. For
a large weight (more elements than ``_FUSE_MAX_WEIGHT`` allows: bge-small-zh's
512x2048) that would serialise the GEMM, and for rows longer than 512 the row block would not fit
in registers. There the GEMM with the bias and residual epilogue runs as a tiled
kernel over the output (storing the rounded sum, as eager does) and a second kernel
normalises the rows in place: two launches instead of eager's three plus the
dropout call. ``_promote``, ``_broadcast_shape`` and the ``_round`` device
function are ``FusedAddLayerNorm``'s, imported from that rule file.
"""

import math

import torch
import triton
import triton.language as tl
from pass_dir.FusedAddLayerNorm import _broadcast_shape, _check_int32_offsets, _promote, _round

_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
# The fused kernel takes weights of at most this many elements: one program (one SM)
# runs 16 x numel multiply-adds on the tensor cores (three TF32 products each in
# fp32) and reads the whole weight (bge-small-zh's 512x512: 1 MB in fp32, 512 KB in
# fp16/bf16).
_FUSE_MAX_WEIGHT = {torch.float32: 262144, torch.float16: 262144, torch.bfloat16: 262144}


@triton.jit
def _linear_add(
    x_ptr,
    w_ptr,
    b_ptr,
    r_ptr,
    out_ptr,
    rows,
    cols,
    M,
    N,
    K,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
    ROUND_PRODUCT: tl.constexpr,
):
    # round(round(x[rows] @ w[cols].T + b[cols]) + r[rows, cols]) in fp32, zero outside
    # the [M, N] block. x: contiguous [M, K]; w: contiguous [N, K]; r: contiguous [M, N].
    row_ok = rows < M
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        a = tl.load(
            x_ptr + rows[:, None] * K + k[None, :],
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        b = tl.load(
            w_ptr + k[:, None] + cols[None, :] * K,
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        if x_ptr.dtype.element_ty == tl.float32:
            acc = tl.dot(a, b, acc, input_precision="tf32x3")
        elif UPCAST:
            # bf16/fp16 products are exact in fp32: same result as the half-precision MMA
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    if ROUND_PRODUCT:  # eager's unfused linear: matmul, then add the bias
        acc = _round(acc, x_ptr)
    acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    ok = row_ok[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    s = _round(acc, x_ptr) + tl.load(r_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    return tl.where(ok, _round(s, out_ptr), 0.0), ok, offs


@triton.jit
def _fused_body(
    x_ptr, w_ptr, b_ptr, r_ptr, lnw_ptr, lnb_ptr, out_ptr, M, N, K, eps, BLOCK_N, UPCAST
):
    # 16 rows and the whole row (BLOCK_N >= N, 16 <= BLOCK_N <= 512) per program; the K
    # step keeps a weight tile at 32 KB (8192 fp32 or 16384 fp16/bf16 elements).
    rows = tl.program_id(0) * 16 + tl.arange(0, 16)
    cols = tl.arange(0, BLOCK_N)
    if x_ptr.dtype.element_ty == tl.float32:
        s, ok, offs = _linear_add(
            x_ptr,
            w_ptr,
            b_ptr,
            r_ptr,
            out_ptr,
            rows,
            cols,
            M,
            N,
            K,
            BLOCK_N,
            8192 // BLOCK_N,
            UPCAST,
            False,
        )
    else:
        s, ok, offs = _linear_add(
            x_ptr,
            w_ptr,
            b_ptr,
            r_ptr,
            out_ptr,
            rows,
            cols,
            M,
            N,
            K,
            BLOCK_N,
            16384 // BLOCK_N,
            UPCAST,
            False,
        )
    col_ok = cols < N
    mean = tl.sum(s, axis=1) / N
    diff = tl.where(ok, s - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / N
    y = diff * tl.math.rsqrt(var + eps)[:, None]
    y = y * tl.load(lnw_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    y += tl.load(lnb_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + offs, _round(y, out_ptr).to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _fused_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, lnw_ptr, lnb_ptr, out_ptr, M, N, K, eps, BLOCK_N: tl.constexpr
):
    _fused_body(x_ptr, w_ptr, b_ptr, r_ptr, lnw_ptr, lnb_ptr, out_ptr, M, N, K, eps, BLOCK_N, False)


@triton.jit
def _fused_kernel_interp(
    x_ptr, w_ptr, b_ptr, r_ptr, lnw_ptr, lnb_ptr, out_ptr, M, N, K, eps, BLOCK_N: tl.constexpr
):
    # Triton's CPU interpreter multiplies bf16 tiles as raw integers: upcast them there.
    _fused_body(x_ptr, w_ptr, b_ptr, r_ptr, lnw_ptr, lnb_ptr, out_ptr, M, N, K, eps, BLOCK_N, True)


@triton.jit
def _linear_add_tile(x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N, UPCAST, ROUND_PRODUCT):
    # The tiled GEMM: a [16, BLOCK_N] tile of the rounded sum per program, stored.
    rows = tl.program_id(1) * 16 + tl.arange(0, 16)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    s, ok, offs = _linear_add(
        x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, rows, cols, M, N, K, BLOCK_N, 64, UPCAST, ROUND_PRODUCT
    )
    tl.store(out_ptr + offs, s.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _linear_add_kernel(x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N: tl.constexpr):
    _linear_add_tile(x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N, False, False)


@triton.jit
def _linear_add_kernel_interp(x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N: tl.constexpr):
    _linear_add_tile(x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N, True, False)


@triton.jit
def _linear_add_kernel_unfused_bias(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr
):
    # A linear that eager runs as matmul and then a bias add (see _general).
    _linear_add_tile(x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K, BLOCK_N, UPCAST, True)


@triton.jit
def _layer_norm_kernel(s_ptr, w_ptr, b_ptr, n_rows, N, eps, BLOCK_N: tl.constexpr):
    # In place over contiguous rows of N: whole rows per program, about 4096 elements
    # (one row when BLOCK_N > 4096).
    rows = tl.program_id(0) * ((BLOCK_N + 4095) // BLOCK_N) + tl.arange(
        0, (BLOCK_N + 4095) // BLOCK_N
    )
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ok = (rows < n_rows)[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    s = tl.load(s_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(s, axis=1) / N
    diff = tl.where(ok, s - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / N
    y = diff * tl.math.rsqrt(var + eps)[:, None]
    y = y * tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    y += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(s_ptr + offs, _round(y, s_ptr).to(s_ptr.dtype.element_ty), mask=ok)


def _general(x, weight, bias, residual, p, normalized_shape, ln_weight, ln_bias, eps):
    """Every case the fast path does not take: validate like eager, bring the operands to
    the kernels' form (contiguous, full-size residual, every parameter present) and run
    the fused kernel or the tiled GEMM and the in-place LayerNorm (also for a normalized
    shape of several dims: rows of their product)."""
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not isinstance(eps, (int, float)):
        raise TypeError(f"FusedLinearAddLayerNorm: eps must be a number, got {eps!r}")
    if (
        x.dtype not in _KIND
        or weight.dtype != x.dtype
        or (bias is not None and bias.dtype != x.dtype)
    ):
        raise TypeError(
            f"FusedLinearAddLayerNorm supports float32/float16/bfloat16 linears of one dtype, "
            f"got x {x.dtype}, weight {weight.dtype}, bias {None if bias is None else bias.dtype}"
        )
    if x.dim() == 0 or weight.dim() != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(
            f"FusedLinearAddLayerNorm: weight {tuple(weight.shape)} does not take "
            f"x {tuple(x.shape)}"
        )
    K, N = x.shape[-1], weight.shape[0]
    if bias is not None and tuple(bias.shape) != (N,):
        raise ValueError(f"FusedLinearAddLayerNorm: bias {tuple(bias.shape)} is not ({N},)")
    h_shape = [*x.shape[:-1], N]
    if isinstance(residual, torch.Tensor):
        if residual.dtype not in _KIND:
            raise TypeError(f"FusedLinearAddLayerNorm: residual dtype {residual.dtype}")
        sum_dtype = _promote(x.dtype, residual.dtype)
        shape = _broadcast_shape(h_shape, residual.shape, "FusedLinearAddLayerNorm")
    elif isinstance(residual, (int, float)):
        sum_dtype, shape = x.dtype, h_shape
    else:
        raise TypeError(f"FusedLinearAddLayerNorm adds a tensor or a number, got {residual!r}")
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if shape[len(shape) - len(ns) :] != ns:
        raise ValueError(f"FusedLinearAddLayerNorm: normalized_shape {ns} does not end {shape}")
    for name, t in (("weight", ln_weight), ("bias", ln_bias)):
        if t is not None and list(t.shape) != ns:
            raise ValueError(
                f"FusedLinearAddLayerNorm: LayerNorm {name} {tuple(t.shape)} is not {ns}"
            )
    out = torch.empty(shape, dtype=sum_dtype, device=x.device)
    if out.numel() == 0:
        return out
    dev, f32 = x.device, torch.float32
    # Eager's linear adds the bias in the GEMM (one rounding) for a 2-d or contiguous x;
    # otherwise it runs matmul and then adds the bias, rounding the product first.
    round_product = bias is not None and x.dim() != 2 and not x.is_contiguous()
    # Broadcasts are materialised: x over the residual's extra leading dims, a linear with
    # one output feature over the residual's row (as repeated weight rows), the residual.
    if shape[:-1] != h_shape[:-1]:
        x = x.expand([*shape[:-1], K])
    if shape[-1] != N:
        weight = weight.expand(shape[-1], K)
        bias = bias.expand(shape[-1]) if bias is not None else None
        N = shape[-1]
    x, weight = x.contiguous(), weight.contiguous()
    bias = bias.contiguous() if bias is not None else torch.zeros(N, dtype=f32, device=dev)
    if isinstance(residual, torch.Tensor):
        r = residual.expand(shape).contiguous()
    else:  # a number: one fp32 value per element, added in fp32 as eager does
        r = torch.full(shape, float(residual), dtype=f32, device=dev)
    ln_w = (
        ln_weight.contiguous() if ln_weight is not None else torch.ones(ns, dtype=f32, device=dev)
    )
    ln_b = ln_bias.contiguous() if ln_bias is not None else torch.zeros(ns, dtype=f32, device=dev)
    M, R, eps = out.numel() // N, math.prod(ns), float(eps)
    _check_int32_offsets(
        "FusedLinearAddLayerNorm",
        ("x", x),
        ("weight", weight),
        ("bias", bias),
        ("residual", r),
        ("ln_weight", ln_w),
        ("ln_bias", ln_b),
        ("out", out),
    )
    interp = not x.is_cuda
    if R == N and N <= 512 and 0 < N * K <= _FUSE_MAX_WEIGHT[x.dtype] and not round_product:
        kernel = _fused_kernel_interp if interp else _fused_kernel
        block_n = max(16, triton.next_power_of_2(N))
        kernel[(triton.cdiv(M, 16),)](x, weight, bias, r, ln_w, ln_b, out, M, N, K, eps, block_n)
        return out
    block_n = 16 if x.dtype == torch.float32 else 32
    grid = (triton.cdiv(N, block_n), triton.cdiv(M, 16))
    if round_product:
        upcast = interp and x.dtype == torch.bfloat16
        _linear_add_kernel_unfused_bias[grid](x, weight, bias, r, out, M, N, K, block_n, upcast)
    else:
        kernel = _linear_add_kernel_interp if interp else _linear_add_kernel
        kernel[grid](x, weight, bias, r, out, M, N, K, block_n)
    block_r = triton.next_power_of_2(R)
    _layer_norm_kernel[(triton.cdiv(M * N // R, max(1, 4096 // block_r)),)](
        out, ln_w, ln_b, M * N // R, R, eps, block_r, num_warps=4 if block_r <= 4096 else 16
    )
    return out


@torch.fx.wrap
def fused_linear_add_layer_norm(
    x, weight, bias, residual, p, normalized_shape, ln_weight, ln_bias, eps
):
    """``layer_norm(dropout(linear(x, weight, bias), p, False, False) + residual, ...)``."""
    # Fast path, the real graphs' case: one dtype, contiguous, the residual the linear's
    # shape, the LayerNorm over its features, and x [M, K], weight [N, K], residual and out
    # [M, N] all of fewer than 2**31 elements (int32 offsets; (M + N) * (N + K) bounds
    # them: _general checks larger ones one by one and refuses what does not fit).
    if (
        isinstance(residual, torch.Tensor)
        and bias is not None
        and ln_weight is not None
        and ln_bias is not None
        and weight.dtype is bias.dtype is residual.dtype is x.dtype
        and x.dtype in _KIND
        and weight.dim() == 2
        and x.is_contiguous()
        and weight.is_contiguous()
        and residual.is_contiguous()
        and bias.is_contiguous()
        and ln_weight.is_contiguous()
        and ln_bias.is_contiguous()
        and type(eps) is float
        and type(p) is float
        and 0.0 <= p <= 1.0
        and x.dim()
    ):
        shape, x_shape = residual.shape, x.shape
        N, K = weight.shape
        if (
            normalized_shape == (N,)
            and x_shape[-1] == K
            and bias.shape == normalized_shape
            and ln_weight.shape == normalized_shape
            and ln_bias.shape == normalized_shape
            and shape[-1] == N
            and x_shape[:-1] == shape[:-1]
            and 0 < N * K
            and N <= 4096
        ):
            M = residual.numel() // N
            if (M + N) * (N + K) < 2**31:
                out = torch.empty_like(residual)
                if not M:
                    return out
                if N <= 512 and N * K <= _FUSE_MAX_WEIGHT[x.dtype]:
                    (_fused_kernel if x.is_cuda else _fused_kernel_interp)[((M + 15) >> 4,)](
                        x,
                        weight,
                        bias,
                        residual,
                        ln_weight,
                        ln_bias,
                        out,
                        M,
                        N,
                        K,
                        eps,
                        1 << math.frexp((N - 1) | 15)[1],  # max(16, next_power_of_2(N)), exactly
                    )
                    return out
                block_n = 16 if x.dtype is torch.float32 else 32
                (_linear_add_kernel if x.is_cuda else _linear_add_kernel_interp)[
                    ((N + block_n - 1) // block_n, (M + 15) >> 4)
                ](x, weight, bias, residual, out, M, N, K, block_n)
                block_n = 1 << math.frexp(N - 1)[1]  # next_power_of_2(N), exactly
                block_r = 4096 // block_n
                _layer_norm_kernel[((M + block_r - 1) // block_r,)](
                    out, ln_weight, ln_bias, M, N, eps, block_n
                )
                return out
    return _general(x, weight, bias, residual, p, normalized_shape, ln_weight, ln_bias, eps)


def pattern(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8):
    tmp_0 = torch._C._nn.linear(in_2, in_1, in_0)
    tmp_1 = torch.nn.functional.dropout(tmp_0, in_3, False, False)
    tmp_2 = tmp_1 + in_4
    tmp_3 = torch.nn.functional.layer_norm(tmp_2, in_5, in_6, in_7, in_8)
    return tmp_3


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8):
    return (in_2, in_1, in_0, in_4, in_3, in_5, in_6, in_7, in_8)


def replacement_func():
    return fused_linear_add_layer_norm
