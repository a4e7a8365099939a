"""A whole BERT feed-forward sublayer (linear + bias + GELU, linear, dropout, residual add,
LayerNorm) as one Triton kernel, the hidden activations never leaving the SM.

Matches ``BertIntermediate`` + ``BertOutput`` of BERT-style encoders (the dev samples
prajjwal1_bert-tiny, ms-marco-TinyBERT-L2, bge-small-zh), where the input ``x`` of the
up-projection is also the residual::

    h = torch._C._nn.gelu(torch._C._nn.linear(x, w1, b1))
    y = torch.nn.functional.dropout(torch._C._nn.linear(h, w2, b2), p, False, False)
    out = torch.nn.functional.layer_norm(y + x, normalized_shape, ln_weight, ln_bias, eps)

Why this rule exists: on these graphs every eager operation and every replacement call
costs host time (a replacement about 40 µs between a real graph's operations on an
H200, an eager operation 10-13 µs; docs/results/pass_library_h200.md, "What a replacement costs
inside a graph"), and the GPU is mostly idle. ``FusedLinearBiasGelu`` alone replaces two
operations and is slower than eager there; this rule replaces six with one call and (on
the dev samples' sizes) one launch.

The kernel takes 16 rows of ``x`` and the whole hidden size ``N`` (up to 512 columns per
program). For each chunk of ``BLOCK_I`` intermediate features it computes ``x @ w1.T +
b1`` (fp32 accumulation), rounds to the dtype where eager stores the linear result,
applies the exact GELU in fp32 and rounds again, then multiplies that chunk into the
``[16, N]`` accumulator of the second linear. The epilogue adds ``b2``, rounds, adds the
residual, rounds, and normalises the rows with a two-pass fp32 mean/variance. fp32
products use three TF32 tensor-core products (``tf32x3``), which recover fp32 accuracy
(eager uses no TF32).

One program reads both weights where they are small (bert-tiny's, TinyBERT's). Larger ones
(bge-small-zh's 512x2048 pair) would serialise the GEMMs on one SM, so their intermediate
features are split over up to 32 programs of one launch: each stores its fp32 partial
product in a zeroed scratch tensor and counts itself done on an atomic counter, and the last
program of a row block sums the partials (in split order, so the result does not depend on
timing) and runs the epilogue. Hidden sizes above 512 are split into column blocks (each
recomputes its chunk of ``h``), and a second kernel sums and normalises the rows.
"""

import math

import torch
import triton
import triton.language as tl
from pass_dir.FusedLinearBiasGelu import _KIND, _check_int32_offsets, _round

# Weights of at most _WEIGHT_ALONE elements (w1 and w2 together) are read by one program
# per row block; larger ones are split over programs of at most _WEIGHT_PER_SPLIT each
# (up to _MAX_SPLIT), while fewer than _MAX_PROGRAMS programs run. On an H200, bert-tiny's
# 2 x 64K weights in one program cost 34 µs of device time per call in fp32 and 11 µs in
# fp16 (eager: 11 µs), and the graph does not wait for them; bge-small-zh's 2 x 1M in one
# program cost 710 / 158 µs, split over 32 programs 25 / 11 µs (eager: 24 / 14 µs).
_WEIGHT_ALONE = 262144
_WEIGHT_PER_SPLIT = 65536
_MAX_SPLIT = 32
_MAX_PROGRAMS = 128


@triton.jit
def _ffn_kernel(
    x_ptr,
    w1_ptr,
    b1_ptr,
    w2_ptr,
    b2_ptr,
    lnw_ptr,
    lnb_ptr,
    out_ptr,
    ws_ptr,
    M,
    N,
    F,
    eps,
    CFG: tl.constexpr,
):
    # x, out: contiguous [M, N]; w1: [F, N]; w2: [N, F]; ws: fp32 scratch (see MODE).
    # CFG = kind + 4 * mode + 16 * round_product + 32 * log2(BLOCK_N) + 512 * log2(BLOCK_I / 16).
    # MODE 1: one program has every feature and column of its rows: the epilogue follows.
    # MODE 2: the features are split over the programs of a row block (one column block):
    #   each stores its partial product in ws[split] ([S, M, N], then one counter per row
    #   block, zeroed by the caller), and the last to finish sums them and runs the epilogue.
    # MODE 0: partial products only, for _ffn_finish_kernel (several column blocks).
    KIND: tl.constexpr = CFG % 4
    MODE: tl.constexpr = CFG // 4 % 4
    ROUND_PRODUCT: tl.constexpr = CFG // 16 % 2 == 1
    BLOCK_N: tl.constexpr = 1 << (CFG // 32 % 16)
    BLOCK_I: tl.constexpr = 16 << (CFG // 512)
    BLOCK_K: tl.constexpr = 64
    rows = tl.program_id(0) * 16 + tl.arange(0, 16)
    split = tl.program_id(1)
    cols = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    # the intermediate features of this program: whole BLOCK_I chunks, split evenly
    per = tl.cdiv(tl.cdiv(F, BLOCK_I), tl.num_programs(1)) * BLOCK_I
    i_lo = split * per
    i_hi = tl.minimum(i_lo + per, F)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    for i0 in range(i_lo, i_hi, BLOCK_I):
        feats = i0 + tl.arange(0, BLOCK_I)
        f_ok = feats < F
        h = tl.zeros((16, BLOCK_I), dtype=tl.float32)
        for k0 in range(0, N, BLOCK_K):
            k = k0 + ks
            k_ok = k < N
            a = tl.load(
                x_ptr + rows[:, None] * N + k[None, :],
                mask=row_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            b = tl.load(
                w1_ptr + k[:, None] + feats[None, :] * N,
                mask=k_ok[:, None] & f_ok[None, :],
                other=0.0,
            )
            if KIND == 0:
                h = tl.dot(a, b, h, input_precision="tf32x3")
            elif KIND == 3:
                # Triton's CPU interpreter multiplies bf16 tiles as raw integers: upcast
                # there (bf16 products are exact in fp32, the same result as the bf16 MMA).
                h = tl.dot(a.to(tl.float32), b.to(tl.float32), h, input_precision="ieee")
            else:
                h = tl.dot(a, b, h)
        if ROUND_PRODUCT:  # eager's unfused linear: matmul, then add the bias
            h = _round(h, KIND)
        h = _round(h + tl.load(b1_ptr + feats, mask=f_ok, other=0.0).to(tl.float32)[None, :], KIND)
        h = _round(h * 0.5 * (1.0 + tl.math.erf(h * 0.7071067811865476)), KIND)
        # w2 as [BLOCK_I, BLOCK_N]: w2[cols, feats] transposed; features past F read zeros
        w = tl.load(
            w2_ptr + feats[:, None] + cols[None, :] * F,
            mask=f_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        if KIND == 0:
            acc = tl.dot(h, w, acc, input_precision="tf32x3")
        elif KIND == 3:
            acc = tl.dot(h, w.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(h.to(w2_ptr.dtype.element_ty), w, acc)  # exact: h is rounded already
    ok = row_ok[:, None] & col_ok[None, :]
    if MODE == 1:
        _epilogue(acc, rows, cols, ok, x_ptr, b2_ptr, lnw_ptr, lnb_ptr, out_ptr, N, eps, KIND)
    else:
        tl.store(ws_ptr + (split * M + rows[:, None]) * N + cols[None, :], acc, mask=ok)
    if MODE == 2:
        splits = tl.num_programs(1)
        tl.debug_barrier()  # every thread's partial stored before the release below
        counter = ws_ptr + splits * M * N + tl.program_id(0)
        # fp32 counts are exact far beyond the number of splits
        ticket = tl.atomic_add(counter, 1.0, sem="acq_rel", scope="gpu")
        if ticket == splits - 1:
            acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
            for other in range(0, splits):  # in order: the sum does not depend on timing
                acc += tl.load(
                    ws_ptr + (other * M + rows[:, None]) * N + cols[None, :],
                    mask=ok,
                    other=0.0,
                    cache_modifier=".cg",  # other SMs' stores: from L2, not this SM's L1
                )
            _epilogue(acc, rows, cols, ok, x_ptr, b2_ptr, lnw_ptr, lnb_ptr, out_ptr, N, eps, KIND)


@triton.jit
def _epilogue(
    acc, rows, cols, ok, x_ptr, b2_ptr, lnw_ptr, lnb_ptr, out_ptr, N, eps, KIND: tl.constexpr
):
    # acc: fp32 [R, C] second-linear products of whole rows (C >= N; zero outside ``ok``)
    col_ok = cols < N
    offs = rows[:, None] * N + cols[None, :]
    y = _round(acc + tl.load(b2_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :], KIND)
    s = _round(y + tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32), KIND)
    s = tl.where(ok, s, 0.0)
    mean = tl.sum(s, axis=1) / N
    diff = tl.where(ok, s - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / N
    out = diff * tl.math.rsqrt(var + eps)[:, None]
    out = out * tl.load(lnw_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    out += tl.load(lnb_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + offs, _round(out, KIND).to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _ffn_finish_kernel(
    ws_ptr, x_ptr, b2_ptr, lnw_ptr, lnb_ptr, out_ptr, M, N, S, eps, CFG: tl.constexpr
):
    # One row per program: the sum of the S partial products, then the epilogue.
    # CFG = kind + 32 * log2(BLOCK_N), BLOCK_N >= N.
    KIND: tl.constexpr = CFG % 4
    BLOCK_N: tl.constexpr = 1 << (CFG // 32)
    rows = tl.program_id(0) + tl.arange(0, 1)
    cols = tl.arange(0, BLOCK_N)
    ok = (rows < M)[:, None] & (cols < N)[None, :]
    acc = tl.zeros((1, BLOCK_N), dtype=tl.float32)
    for split in range(0, S):
        acc += tl.load(ws_ptr + (split * M + rows[:, None]) * N + cols[None, :], mask=ok, other=0.0)
    _epilogue(acc, rows, cols, ok, x_ptr, b2_ptr, lnw_ptr, lnb_ptr, out_ptr, N, eps, KIND)


def _launch(x, w1, b1, w2, b2, ln_w, ln_b, out, M, N, F, eps, kind):
    """Run the kernel on contiguous operands; ``kind`` may carry the round-product flag (16)."""
    log_n = math.frexp(min(N, 512) - 1)[1]
    if log_n < 4:
        log_n = 4
    blocks_n = (N + (1 << log_n) - 1) >> log_n
    blocks_m = (M + 15) >> 4
    # features per step: on narrow rows (128) fp16/bf16 ran fastest with 128, fp32 with 64
    block_i = 128 if log_n <= 7 and kind & 3 else 64
    cfg = kind + 32 * log_n + 512 * (math.frexp(block_i)[1] - 5)
    # Split the features of large weights over programs, in whole block_i chunks.
    split = 1
    if 2 * N * F > _WEIGHT_ALONE:
        chunks = (F + block_i - 1) // block_i
        while (
            split < _MAX_SPLIT
            and 2 * split <= chunks
            and 2 * N * F > _WEIGHT_PER_SPLIT * split
            and blocks_m * blocks_n * split < _MAX_PROGRAMS
        ):
            split *= 2
    while split > 1 and split * M * N + blocks_m >= 2**31:  # the scratch's int32 offsets
        split //= 2
    if blocks_n == 1:
        if split == 1:
            ws = out  # not read
        else:
            ws = torch.zeros(split * M * N + blocks_m, dtype=torch.float32, device=x.device)
        _ffn_kernel[(blocks_m, split, 1)](
            x,
            w1,
            b1,
            w2,
            b2,
            ln_w,
            ln_b,
            out,
            ws,
            M,
            N,
            F,
            eps,
            cfg + (4 if split == 1 else 8),
            num_warps=8 if log_n >= 9 else 4,
        )
        return out
    # rows longer than 512: column blocks (each recomputes its features' h), summed and
    # normalised by a second kernel
    ws = torch.empty(split * M * N, dtype=torch.float32, device=x.device)
    _ffn_kernel[(blocks_m, split, blocks_n)](
        x, w1, b1, w2, b2, ln_w, ln_b, out, ws, M, N, F, eps, cfg, num_warps=8 if log_n >= 9 else 4
    )
    _ffn_finish_kernel[(M,)](
        ws, x, b2, ln_w, ln_b, out, M, N, split, eps, (kind & 3) + 32 * math.frexp(N - 1)[1]
    )
    return out


def _general(x, w1, b1, w2, b2, p, normalized_shape, ln_weight, ln_bias, eps):
    """Validate like eager and bring every operand to the kernel's form (contiguous, every
    parameter present); the case of one dtype throughout, which the pattern's graphs have."""
    name = "FusedFeedForwardAddLayerNorm"
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError(f"{name}: eps must be a number, got {eps!r}")
    dt = x.dtype
    tensors = {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "ln_weight": ln_weight, "ln_bias": ln_bias}
    if dt not in _KIND or any(t is not None and t.dtype != dt for t in tensors.values()):
        got = ", ".join(f"{k} {None if t is None else t.dtype}" for k, t in tensors.items())
        raise TypeError(
            f"{name} supports float32/float16/bfloat16 with one dtype, got x {dt}, {got}"
        )
    if x.dim() == 0:
        raise ValueError(f"{name}: x must have at least one dimension")
    N = x.shape[-1]
    if w1.dim() != 2 or w1.shape[1] != N:
        raise ValueError(f"{name}: w1 {tuple(w1.shape)} does not take x {tuple(x.shape)}")
    F = w1.shape[0]
    if w2.dim() != 2 or tuple(w2.shape) != (N, F):
        raise ValueError(
            f"{name}: w2 {tuple(w2.shape)} is not ({N}, {F}): the second linear must map the "
            f"{F} intermediate features back to x's {N} (the residual)"
        )
    for key, t, size in (
        ("b1", b1, F),
        ("b2", b2, N),
        ("ln_weight", ln_weight, N),
        ("ln_bias", ln_bias, N),
    ):
        if t is not None and tuple(t.shape) != (size,):
            raise ValueError(f"{name}: {key} {tuple(t.shape)} is not ({size},)")
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if ns != [N]:
        raise ValueError(
            f"{name}: normalized_shape {ns} is not [{N}]: the LayerNorm must be over the features"
        )
    if F == 0:
        raise ValueError(f"{name}: zero intermediate features")
    out = torch.empty(x.shape, dtype=dt, device=x.device)
    M = x.numel() // N if N else 0
    if M == 0 or N == 0:
        return out
    kind = _KIND[dt]
    if kind == 2 and not x.is_cuda:
        kind = 3
    # Eager's linear adds the bias in the GEMM (one rounding) for a 2-d or contiguous x;
    # otherwise it runs matmul and then adds the bias, rounding the product first.
    if b1 is not None and x.dim() != 2 and not x.is_contiguous():
        kind += 16
    dev = x.device
    b1 = b1.contiguous() if b1 is not None else torch.zeros(F, dtype=dt, device=dev)
    b2 = b2.contiguous() if b2 is not None else torch.zeros(N, dtype=dt, device=dev)
    ln_w = ln_weight.contiguous() if ln_weight is not None else torch.ones(N, dtype=dt, device=dev)
    ln_b = ln_bias.contiguous() if ln_bias is not None else torch.zeros(N, dtype=dt, device=dev)
    x, w1, w2 = x.contiguous(), w1.contiguous(), w2.contiguous()
    _check_int32_offsets(name, ("x", x), ("w1", w1), ("w2", w2), ("out", out))
    return _launch(x, w1, b1, w2, b2, ln_w, ln_b, out, M, N, F, float(eps), kind)


@torch.fx.wrap
def fused_feed_forward_add_layer_norm(
    x, w1, b1, w2, b2, p, normalized_shape, ln_weight, ln_bias, eps
):
    """``layer_norm(dropout(linear(gelu(linear(x, w1, b1)), w2, b2), p, False, False) + x, ...)``."""
    # Fast path, the real graphs' case: one dtype, contiguous operands, every parameter
    # present, and x [M, N], w1 [F, N], w2 [N, F] of fewer than 2**31 elements each
    # ((M + F) * (N + F) bounds them; _general checks larger ones one by one).
    dt = x.dtype
    if (
        dt in _KIND
        and b1 is not None
        and b2 is not None
        and ln_weight is not None
        and ln_bias is not None
        and w1.dtype is dt
        and w2.dtype is dt
        and b1.dtype is dt
        and b2.dtype is dt
        and ln_weight.dtype is dt
        and ln_bias.dtype is dt
        and type(eps) is float
        and type(p) is float
        and 0.0 <= p <= 1.0
        and x.dim()
        and w1.dim() == 2
        and x.is_contiguous()
        and w1.is_contiguous()
        and w2.is_contiguous()
        and b1.is_contiguous()
        and b2.is_contiguous()
        and ln_weight.is_contiguous()
        and ln_bias.is_contiguous()
    ):
        F, N = w1.shape
        if (
            x.shape[-1] == N
            and w2.shape == (N, F)
            and normalized_shape == (N,)
            and b1.shape == (F,)
            and b2.shape == (N,)
            and ln_weight.shape == (N,)
            and ln_bias.shape == (N,)
            and N
            and F
        ):
            M = x.numel() // N
            if (M + F) * (N + F) < 2**31:
                out = torch.empty_like(x)
                if not M:
                    return out
                kind = _KIND[dt]
                if kind == 2 and not x.is_cuda:
                    kind = 3
                return _launch(x, w1, b1, w2, b2, ln_weight, ln_bias, out, M, N, F, eps, kind)
    return _general(x, w1, b1, w2, b2, p, normalized_shape, ln_weight, ln_bias, eps)


def pattern(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9):
    tmp_0 = torch._C._nn.linear(in_0, in_1, in_2)
    tmp_1 = torch._C._nn.gelu(tmp_0)
    tmp_2 = torch._C._nn.linear(tmp_1, in_3, in_4)
    tmp_3 = torch.nn.functional.dropout(tmp_2, in_5, False, False)
    tmp_4 = tmp_3 + in_0
    tmp_5 = torch.nn.functional.layer_norm(tmp_4, in_6, in_7, in_8, in_9)
    return tmp_5


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9):
    return (in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7, in_8, in_9)


def replacement_func():
    return fused_feed_forward_add_layer_norm
