"""The BERT feed-forward block (linear, exact GELU, linear, eval dropout) as one Triton kernel.

Matches (``BertIntermediate`` + ``BertOutput.dense`` and its dropout: once per
encoder layer of prajjwal1_bert-tiny, ms-marco-TinyBERT-L2, bge-small-zh; the
same block in splade-mini and the Swin and ViT samples)::

    h = torch._C._nn.gelu(torch._C._nn.linear(x, w1, b1))
    out = torch.nn.functional.dropout(torch._C._nn.linear(h, w2, b2), p, False, False)

Eager runs four ops: the up-projection GEMM, GELU over the ``[M, I]``
intermediate (``I = 4D``), the down-projection GEMM and the dropout, which in
eval mode (``training=False``, literal in the pattern) returns its input and only
costs host time. Here one launch does everything and the intermediate never
leaves registers: a program owns ``BLOCK_M`` rows of ``x`` and walks the
intermediate dimension in chunks of ``BLOCK_I``: ``h = x @ w1[chunk].T + b1``
(fp32 accumulation, rounded to the dtype where eager stores the linear result),
exact GELU in fp32 (rounded where eager stores it), then ``acc += gelu(h) @
w2[:, chunk].T`` into an fp32 ``[BLOCK_M, next_power_of_2(D)]`` accumulator;
finally ``+ b2``, rounded, stored. fp32 inputs use IEEE fp32 products (eager uses
no TF32).

A program reads the chunk's rows of ``w1`` and columns of ``w2``. With few tokens
(10 to 68 in the dev samples) one row block holds all of them, so for a large
block (``D * I`` above 64K weight pairs, bge-small-zh's 512 x 2048) the chunks are
spread over a second grid dimension: each program adds its partial sums into a
zeroed fp32 workspace with atomics, and the last program of a row block (an atomic
counter) adds ``b2``, rounds and stores. The fp32 sum's order then varies from run
to run, within fp32 rounding, as it does between any two GEMM implementations.
"""

import torch
import triton
import triton.language as tl

# Kernel dtype code: 0 fp32, 1 fp16, 2 bf16 (3: bf16 on the CPU interpreter);
# + 4 without b1, + 8 without b2.
_KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
# Largest D * I one program handles alone (bert-tiny, TinyBERT: 128 * 512).
_SOLO = 65536


@triton.jit
def _round(x, KIND: tl.constexpr):
    # An eager fp16/bf16 op stores its result in that dtype: round where it does.
    # bf16 rounds to nearest-even by bit arithmetic (Triton's interpreter truncates in .to()).
    if KIND == 1:
        x = x.to(tl.float16).to(tl.float32)
    elif KIND >= 2:
        u = x.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        x = tl.where(x != x, x, u.to(tl.float32, bitcast=True))
    return x


@triton.jit
def _dot(a, b, acc, KIND: tl.constexpr):
    if KIND == 0:
        acc = tl.dot(a, b, acc, input_precision="ieee")
    elif KIND == 3:
        # Triton's CPU interpreter multiplies bf16 tiles as raw integers: upcast there
        # (bf16 products are exact in fp32: the same result as the bf16 MMA).
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _mlp_rows(x_ptr, w1_ptr, b1_ptr, w2_ptr, rows, i_lo, i_hi, M, SHAPE: tl.constexpr):
    """fp32 ``gelu(x[rows] @ w1[i].T + b1[i]) @ w2[:, i].T`` summed over ``i_lo <= i < i_hi``."""
    KIND: tl.constexpr = SHAPE % 4
    HAS_B1: tl.constexpr = SHAPE // 4 % 2 == 0
    BLOCK_D: tl.constexpr = SHAPE // 16 % 16384
    D: tl.constexpr = SHAPE // 262144 % 16384
    INTER: tl.constexpr = SHAPE // 4294967296
    BLOCK_K: tl.constexpr = BLOCK_D if BLOCK_D <= 128 else 64
    BLOCK_I: tl.constexpr = 64 if BLOCK_D <= 128 else (32 if BLOCK_D <= 1024 else 16)
    BLOCK_M: tl.constexpr = 16  # len(rows)
    r_ok = rows < M
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    offs_i = tl.arange(0, BLOCK_I)
    offs_k = tl.arange(0, BLOCK_K)
    if BLOCK_K == BLOCK_D:
        # The whole row fits one K step: load it once for every chunk.
        xa = tl.load(
            x_ptr + rows[:, None] * D + offs_d[None, :],
            mask=r_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for i0 in range(i_lo, i_hi, BLOCK_I):
        i = i0 + offs_i
        i_ok = i < INTER
        if BLOCK_K == BLOCK_D:
            w1 = tl.load(
                w1_ptr + i[None, :] * D + offs_d[:, None],
                mask=d_ok[:, None] & i_ok[None, :],
                other=0.0,
            )
            h = _dot(xa, w1, tl.zeros((BLOCK_M, BLOCK_I), dtype=tl.float32), KIND)
        else:
            h = tl.zeros((BLOCK_M, BLOCK_I), dtype=tl.float32)
            for k0 in range(0, D, BLOCK_K):
                k = k0 + offs_k
                k_ok = k < D
                a = tl.load(
                    x_ptr + rows[:, None] * D + k[None, :],
                    mask=r_ok[:, None] & k_ok[None, :],
                    other=0.0,
                )
                w1 = tl.load(
                    w1_ptr + i[None, :] * D + k[:, None],
                    mask=k_ok[:, None] & i_ok[None, :],
                    other=0.0,
                )
                h = _dot(a, w1, h, KIND)
        if HAS_B1:
            h += tl.load(b1_ptr + i, mask=i_ok, other=0.0).to(tl.float32)[None, :]
        h = _round(h, KIND)
        g = _round(h * 0.5 * (1.0 + tl.math.erf(h * 0.7071067811865476)), KIND)
        w2 = tl.load(
            w2_ptr + offs_d[None, :] * INTER + i[:, None],
            mask=i_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        # Masked chunk columns are gelu(0) = 0 against zero rows of w2.
        acc = _dot(g.to(w2.dtype), w2, acc, KIND)
    return acc


@triton.jit
def _mlp_store(acc, b2_ptr, out_ptr, rows, M, SHAPE: tl.constexpr):
    KIND: tl.constexpr = SHAPE % 4
    HAS_B2: tl.constexpr = SHAPE // 8 % 2 == 0
    BLOCK_D: tl.constexpr = SHAPE // 16 % 16384
    D: tl.constexpr = SHAPE // 262144 % 16384
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    if HAS_B2:
        acc += tl.load(b2_ptr + offs_d, mask=d_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(
        out_ptr + rows[:, None] * D + offs_d[None, :],
        _round(acc, KIND).to(out_ptr.dtype.element_ty),
        mask=(rows < M)[:, None] & d_ok[None, :],
    )


@triton.jit
def _mlp_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, out_ptr, M, SHAPE: tl.constexpr):
    # x, out: contiguous [M, D]; w1: [I, D]; w2: [D, I]. SHAPE packs the dtype code,
    # next_power_of_2(D), D and I (see the wrapper). One program: 16 rows, every chunk.
    INTER: tl.constexpr = SHAPE // 4294967296
    rows = tl.program_id(0) * 16 + tl.arange(0, 16)
    acc = _mlp_rows(x_ptr, w1_ptr, b1_ptr, w2_ptr, rows, 0, INTER, M, SHAPE)
    _mlp_store(acc, b2_ptr, out_ptr, rows, M, SHAPE)


@triton.jit
def _mlp_split_kernel(
    x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, out_ptr, ws_ptr, M, SHAPE: tl.constexpr
):
    # As _mlp_kernel, the chunks split over grid axis 1. ws: zeroed fp32 [M * D] sums,
    # then one arrival counter per row block.
    D: tl.constexpr = SHAPE // 262144 % 16384
    INTER: tl.constexpr = SHAPE // 4294967296
    BLOCK_D: tl.constexpr = SHAPE // 16 % 16384
    BLOCK_I: tl.constexpr = 64 if BLOCK_D <= 128 else (32 if BLOCK_D <= 1024 else 16)
    pid_m = tl.program_id(0)
    split = tl.num_programs(1)
    span = tl.cdiv(tl.cdiv(INTER, BLOCK_I), split) * BLOCK_I
    i_lo = tl.program_id(1) * span
    rows = pid_m * 16 + tl.arange(0, 16)
    acc = _mlp_rows(x_ptr, w1_ptr, b1_ptr, w2_ptr, rows, i_lo, min(i_lo + span, INTER), M, SHAPE)
    offs_d = tl.arange(0, BLOCK_D)
    sums = ws_ptr + rows[:, None] * D + offs_d[None, :]
    ok = (rows < M)[:, None] & (offs_d < D)[None, :]
    tl.atomic_add(sums, acc, mask=ok, sem="relaxed")
    # Every thread's adds precede the counter's release (the CUDA threadfence-reduction
    # pattern); the last program of the row block acquires them all.
    tl.debug_barrier()
    if tl.atomic_add(ws_ptr + M * D + pid_m, 1.0, sem="acq_rel") == split - 1:
        total = tl.load(sums, mask=ok, other=0.0, cache_modifier=".cg")
        _mlp_store(total, b2_ptr, out_ptr, rows, M, SHAPE)


@torch.fx.wrap
def fused_linear_gelu_linear(x, w1, b1, w2, b2):
    """``linear(gelu(linear(x, w1, b1)), w2, b2)`` (exact erf GELU); biases may be None."""
    dt = x.dtype
    D = x.shape[-1]
    inter = w1.shape[0]
    if (
        dt in _KIND
        and b1 is not None
        and b2 is not None
        and w1.dtype == dt
        and w2.dtype == dt
        and b1.dtype == dt
        and b2.dtype == dt
        and (w1.shape, w2.shape, b1.shape, b2.shape) == ((inter, D), (D, inter), (inter,), (D,))
        and 0 < D <= 2048
        and x.is_contiguous()
        and w1.is_contiguous()
        and w2.is_contiguous()
        and b1.is_contiguous()
        and b2.is_contiguous()
    ):
        # Fast path: the dev samples' case.
        kind = _KIND[dt]
        if kind == 2 and not x.is_cuda:
            kind = 3
    else:
        x, w1, b1, w2, b2, kind = _general(x, w1, b1, w2, b2)
    out = torch.empty_like(x)
    M = x.numel() // D
    if M == 0:
        return out
    n_rows = (M + 15) >> 4
    block_d = 16
    while block_d < D:
        block_d += block_d
    shape = kind + 16 * block_d + 262144 * D + 4294967296 * inter
    if D * inter <= _SOLO:
        # bert-tiny, TinyBERT: 16 rows per program, every chunk.
        if kind % 4 and D <= 128:
            _mlp_kernel[(n_rows,)](x, w1, b1, w2, b2, out, M, shape)
        else:
            # fp32 products run on the CUDA cores: more warps per program.
            _mlp_kernel[(n_rows,)](
                x, w1, b1, w2, b2, out, M, shape, num_warps=8 if D <= 512 else 16
            )
        return out
    # bge-small-zh: about _SOLO weight pairs per program (fp32, whose products are
    # slower, a quarter of that), in whole chunks (the kernel's BLOCK_I).
    chunk = 64 if D <= 128 else (32 if D <= 1024 else 16)
    per = _SOLO if kind % 4 else _SOLO // 4
    split = min((D * inter + per - 1) // per, (inter + chunk - 1) // chunk)
    ws = x.new_zeros((M * D + n_rows,), dtype=torch.float32)
    _mlp_split_kernel[(n_rows, split)](
        x, w1, b1, w2, b2, out, ws, M, shape, num_warps=8 if D <= 512 else 16
    )
    return out


def _general(x, w1, b1, w2, b2):
    """Eager-like errors; contiguous operands, flags for missing biases and the dtype code."""
    dt = x.dtype
    if dt not in _KIND or any(t is not None and t.dtype != dt for t in (w1, b1, w2, b2)):
        raise TypeError(
            "FusedLinearGeluLinear supports float32/float16/bfloat16 with one dtype, got "
            + ", ".join(str(None if t is None else t.dtype) for t in (x, w1, b1, w2, b2))
        )
    D = x.shape[-1]
    if w1.dim() != 2 or w1.shape[1] != D:
        raise ValueError(f"FusedLinearGeluLinear: w1 {tuple(w1.shape)} does not take {D} features")
    inter = w1.shape[0]
    if w2.dim() != 2 or w2.shape[1] != inter:
        raise ValueError(
            f"FusedLinearGeluLinear: w2 {tuple(w2.shape)} does not take {inter} features"
        )
    if w2.shape[0] != D:
        raise ValueError(
            f"FusedLinearGeluLinear: w2 {tuple(w2.shape)} does not return the {D} input features"
        )
    if b1 is not None and tuple(b1.shape) != (inter,):
        raise ValueError(f"FusedLinearGeluLinear: b1 {tuple(b1.shape)} is not ({inter},)")
    if b2 is not None and tuple(b2.shape) != (D,):
        raise ValueError(f"FusedLinearGeluLinear: b2 {tuple(b2.shape)} is not ({D},)")
    if D == 0:
        raise ValueError("FusedLinearGeluLinear: zero input features")
    if D > 2048:
        # The [16, next_power_of_2(D)] fp32 accumulator must stay in registers.
        raise ValueError(f"FusedLinearGeluLinear: {D} features, at most 2048 supported")
    kind = _KIND[dt]
    if kind == 2 and not x.is_cuda:
        kind = 3
    if b1 is None:
        b1 = w1  # any pointer: the kernel does not read it
        kind += 4
    if b2 is None:
        b2 = w2
        kind += 8
    return x.contiguous(), w1.contiguous(), b1.contiguous(), w2.contiguous(), b2.contiguous(), kind


def pattern(x, w1, b1, w2, b2, p):
    h = torch._C._nn.linear(x, w1, b1)
    h = torch._C._nn.gelu(h)
    y = torch._C._nn.linear(h, w2, b2)
    return torch.nn.functional.dropout(y, p, False, False)


def replacement_args(x, w1, b1, w2, b2, p):
    return (x, w1, b1, w2, b2)


def replacement_func():
    return fused_linear_gelu_linear
