"""Swin's window-attention softmax with its relative-position bias gathered in the kernel: bias
gather, scale, add, softmax, eval-mode dropout as one Triton kernel.

Matches every unshifted window attention of vuiseng9_tiny-random-SwinModel (3 sites;
its shifted block adds the window mask through views, see
``FusedRelPosBiasShiftedWindowSoftmaxDropout``) and of
yujiepan_tiny-random-swin-patch4-window7-224 (4 sites)::

    bias = table[index.view(-1)].view(a, b, c).permute(2, 0, 1).contiguous().unsqueeze(0)
    probs = torch.nn.functional.softmax(scores / divisor + bias, dim=-1)
    probs = torch.nn.functional.dropout(probs, p, False, False)

``table`` is HF's ``relative_position_bias_table`` ``[(2w-1)^2, heads]`` and ``index``
its ``relative_position_index`` buffer ``[N, N]`` (N = w^2); the view sizes (``N, N, -1``
in the graphs), the divisor and ``p`` are pattern inputs. Eager runs the bias chain as six
operations with two kernels (the gather and the permuted copy) and then three kernels
over the ``[B, heads, N, N]`` scores; the dropout returns its input (``training=False``).

The kernel never materialises the bias: score row ``r`` (query ``i = r mod N``, head
``h = (r // N) mod heads``) reads ``table[index[i * N + j], h]`` at column ``j``, as the
permuted, contiguous gather holds it. A negative index counts from the end as in eager;
an index out of range (eager raises ``IndexError``) is never read: its bias is NaN, so
its row of the output is NaN. The index values stay on the device. The rounding is
``FusedScaleMaskSoftmax``'s (``scores / divisor``, its sum with the bias and the output
rounded to their dtypes as eager stores them, the softmax in fp32; eager on CUDA divides
by a Python scalar as a multiplication by its fp32 reciprocal, on CPU as a true division).

The wrapper has a fast path for the real case (float divisor and ``p``, scores and table
of one dtype, a contiguous int64 index of N*N elements in any shape, views ``(N, N, -1)``,
all contiguous on one device): one allocation and one launch. The general path first runs
eager's own checks with ops the guard allows (``index.view(-1)`` on the index, the bias
view on a meta tensor of the gathered shape: a transposed index or a view ``(-1, -1, C)``
raises as in eager; an index of another dtype raises eager's ``IndexError``), then takes
other dtypes, an int64 or int32 index of any shape, a non-contiguous table (copied), views
``(NQ, NK, C)`` with a bias broadcast over the queries, the heads or the softmax dim
(``NK == 1``), and refuses with a precise error what the kernel cannot do (a view that
regroups the table's columns, bool/uint8 mask indexing, an empty table, 0-dim scores of a
dtype other than the table's: eager's promotion then takes the table's dtype). The kernel is shared with the
shifted-window rule (``HAS_MASK``); its row arithmetic is ``FusedScaleMaskSoftmax``'s
``_softmax_rows`` and ``FusedShiftedWindowSoftmaxDropout``'s ``_window_softmax_rows``.
"""

import math

import torch
import triton
import triton.language as tl
from pass_dir.FusedScaleMaskSoftmax import (
    _KIND,
    _SAME_KIND_MODE,
    _broadcast_shape,
    _check_int32_offsets,
    _next_pow2,
    _promote,
    _softmax_rows,
)
from pass_dir.FusedShiftedWindowSoftmaxDropout import (
    _check_scalars,
    _resolve_view,
    _window_softmax_rows,
)

_RULE = "FusedRelPosBiasSoftmaxDropout"


@triton.jit
def _rel_pos_bias_softmax_kernel(
    x_ptr,
    idx_ptr,
    t_ptr,
    m_ptr,
    out_ptr,
    n_rows,
    NQ,
    N,
    S_I,
    S_J,
    C,
    T,
    m_rows,
    P,
    Q,
    divisor,
    MODE: tl.constexpr,
    HAS_MASK: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # scores and out: contiguous [n_rows, N] = [..., heads, NQ, N]; table: contiguous [T, C];
    # index: contiguous, row r reads index[(r % NQ) * S_I + j * S_J] (S_I = N, or 0 for a bias
    # broadcast over the queries; S_J = 1, or 0 for one broadcast along the softmax dim) and
    # the table's column (r // NQ) % C (C = heads, or 1).
    # HAS_MASK: the shifted window's mask, contiguous [m_rows, N], at row
    # ((r // P) * Q + r % Q) % m_rows (see FusedShiftedWindowSoftmaxDropout's kernel);
    # MODE is _window_softmax_rows' then, else _softmax_rows'.
    BLOCK_R: tl.constexpr = (4096 + BLOCK_N - 1) // BLOCK_N  # ~4K elements: whole rows
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < N
    ok = row_ok[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    i_offs = ((rows % NQ) * S_I)[:, None] + (cols * S_J)[None, :]
    idx = tl.load(idx_ptr + i_offs, mask=ok, other=0).to(tl.int64)
    idx = tl.where(idx < 0, idx + T, idx)  # eager's negative indices count from the end
    hit = ok & (idx >= 0) & (idx < T)  # out of range: not read, a NaN bias
    t_offs = idx * C + ((rows // NQ) % C)[:, None]
    b = tl.load(t_ptr + t_offs, mask=hit, other=float("nan")).to(tl.float32)
    if HAS_MASK:
        m_row = ((rows // P) * Q + rows % Q) % m_rows
        m = tl.load(m_ptr + m_row[:, None] * N + cols[None, :], mask=ok, other=0.0)
        y = _window_softmax_rows(x, b, m.to(tl.float32), row_ok, col_ok, divisor, MODE)
    else:
        y = _softmax_rows(x, b, row_ok, col_ok, divisor, MODE)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=ok)


def _bias_layout(scores, index, table, sizes, rule):
    """Check ``table[index.view(-1)].view(*sizes).permute(2, 0, 1).unsqueeze(0)`` as the bias
    of ``scores`` (eager's view checks included) and find how the kernel gathers it; nothing
    is read from ``index``.

    Returns ``(shape, scores, index, table, s_i, s_j)``: the broadcast shape of the scores and
    the bias ``[1, C, NQ, NK]``, the scores as a contiguous tensor of that shape, the index and
    the table contiguous (the table as ``T`` rows of ``C`` values), and the index's strides
    per query (``NK``, or 0 for a bias broadcast over the queries) and per key (1, or 0 for a
    bias broadcast along the softmax dim).
    """
    if not isinstance(index, torch.Tensor) or not isinstance(table, torch.Tensor):
        raise TypeError(f"{rule} needs a tensor index and table, got {index!r} and {table!r}")
    if scores.dtype not in _KIND or table.dtype not in _KIND:
        raise TypeError(
            f"{rule} supports float32/float16/bfloat16 scores and table, got "
            f"{scores.dtype}, {table.dtype}"
        )
    if index.dtype in (torch.bool, torch.uint8):
        raise TypeError(
            f"{rule} gathers with an int64 or int32 index, got {index.dtype} (eager indexes "
            "with a bool or uint8 tensor as a mask)"
        )
    if index.dtype not in (torch.int64, torch.int32):
        raise IndexError(
            f"{rule}: tensors used as indices must be long, int, byte or bool tensors, got a "
            f"{index.dtype} index"
        )
    if table.dim() == 0:
        raise IndexError(f"{rule}: a 0-d table cannot be indexed")
    if scores.dim() == 0 and scores.dtype != table.dtype:
        raise ValueError(
            f"{rule}: 0-dim scores of {scores.dtype} with a {table.dtype} table are not "
            "supported (eager's type promotion lets a 0-dim operand defer to the other's dtype)"
        )
    if index.device != scores.device or table.device != scores.device:
        raise ValueError(
            f"{rule} needs the scores, index and table on one device, got {scores.device}, "
            f"{index.device}, {table.device}"
        )
    # eager's own checks, with allowed ops: index.view(-1) on the index itself (a layout that
    # cannot be flattened raises as in eager), the bias view on a meta tensor of the gathered
    # shape (sizes that eager refuses raise as in eager); nothing is read or computed.
    index.view(-1)
    M, T, C = index.numel(), table.shape[0], math.prod(table.shape[1:])
    if T == 0 and M:  # eager's gather raises before the view
        raise IndexError(f"{rule}: {M} indices into an empty table {tuple(table.shape)}")
    torch.empty((M, *table.shape[1:]), device="meta").view(*sizes)
    if M == 0 or C == 0:
        raise ValueError(f"{rule}: an empty gather ({M} indices into a table {tuple(table.shape)})")
    NQ, NK, c = _resolve_view(sizes, M * C, rule)
    if c != C or NQ * NK != M:
        raise ValueError(
            f"{rule}: the bias view {tuple(sizes)} of the gathered [{M}, {C}] must split the "
            f"{M} indices as [queries, keys] and keep the table's {C} values per index"
        )
    shape = _broadcast_shape(scores.shape, (1, C, NQ, NK))
    if list(scores.shape) != shape:  # rare: the bias is the larger operand
        scores = scores.expand(shape)
    if not scores.is_contiguous():
        scores = scores.contiguous()
    if not index.is_contiguous():
        index = index.contiguous()
    if not table.is_contiguous():
        table = table.contiguous()
    return shape, scores, index, table, (0 if NQ == 1 else NK), (0 if NK == 1 else 1)


def _launch(scores, index, table, mask, out, shape, s_i, s_j, P, Q, divisor, mode, rule):
    """The general paths' launch: ``shape`` the scores' (non-empty), ``out`` of its elements;
    tensors the kernel's int32 offsets cannot address are refused, naming ``rule``."""
    _check_int32_offsets(
        rule,
        ("scores", scores),
        ("index", index),
        ("table", table),
        ("mask", mask),
        ("out", out),
    )
    N = shape[-1]
    n_rows = math.prod(shape) // N
    block_n = _next_pow2(N)
    block_r = max(1, 4096 // block_n)  # as the kernel derives it
    T = table.shape[0]
    _rel_pos_bias_softmax_kernel[((n_rows + block_r - 1) // block_r,)](
        scores,
        index,
        table,
        mask,
        out,
        n_rows,
        shape[-2],
        N,
        s_i,
        s_j,
        table.numel() // T,
        T,
        1 if mask is None else mask.numel() // N,
        P,
        Q,
        float(divisor),
        MODE=mode,
        HAS_MASK=mask is not None,
        BLOCK_N=block_n,
        num_warps=4 if block_n <= 4096 else min(16, block_n // 512),
    )


def _general(scores, divisor, index, table, sizes, p):
    """Every case the fast path leaves: mixed dtypes, int divisor or p, other views, layouts."""
    _check_scalars(divisor, p, _RULE)
    shape, scores, index, table, s_i, s_j = _bias_layout(scores, index, table, sizes, _RULE)
    out_dtype = _promote(scores.dtype, table.dtype)
    out = torch.empty(shape, dtype=out_dtype, device=scores.device)
    if out.numel():
        mode = _KIND[scores.dtype] + 3 * _KIND[out_dtype] + (9 if scores.is_cuda else 0)
        _launch(scores, index, table, None, out, shape, s_i, s_j, 1, 1, divisor, mode, _RULE)
    return out


@torch.fx.wrap
def fused_rel_pos_bias_softmax_dropout(scores, divisor, index, table, a, b, c, p):
    """``dropout(softmax(scores / divisor + table[index.view(-1)].view(a, b, c).permute(2, 0, 1)
    .unsqueeze(0), dim=-1), p, training=False)``."""
    # Fast path (every site of the Swin samples): float divisor and p, scores [B, H, N, N] and
    # table [T, H] of one dtype, a contiguous int64 index of N * N elements (any shape),
    # views (N, N, -1 or H), all contiguous on one device, the scores and the table of fewer
    # than 2**31 elements together (int32 offsets: _general checks each, refuses the larger).
    if (
        type(divisor) is float
        and type(p) is float
        and 0.0 <= p <= 1.0
        and isinstance(index, torch.Tensor)
        and isinstance(table, torch.Tensor)
    ):
        dtype = scores.dtype
        shape = scores.shape
        t_shape = table.shape
        if (
            dtype in _SAME_KIND_MODE
            and table.dtype is dtype
            and index.dtype is torch.int64
            and len(shape) == 4
            and len(t_shape) == 2
            and shape[2] == a == shape[3] == b
            and 0 < b <= 4096
            and (c == -1 or c == shape[1])
            and t_shape[0] > 0
            and 0 < t_shape[1] == shape[1]
            and index.numel() == b * b
            and scores.is_contiguous()
            and table.is_contiguous()
            and index.is_contiguous()
            and index.device == scores.device == table.device
        ):
            numel = scores.numel()
            if numel + t_shape[0] * t_shape[1] < 2**31:
                out = torch.empty_like(scores)
                n_rows = numel // b
                if n_rows:
                    block_n = _next_pow2(b)
                    # ceil(n_rows / (4096 // block_n)) programs of 4096 // block_n rows
                    _rel_pos_bias_softmax_kernel[((n_rows * block_n + 4095) // 4096,)](
                        scores,
                        index,
                        table,
                        None,
                        out,
                        n_rows,
                        b,
                        b,
                        b,
                        1,
                        t_shape[1],
                        t_shape[0],
                        1,
                        1,
                        1,
                        divisor,
                        MODE=_SAME_KIND_MODE[dtype] + (9 if scores.is_cuda else 0),
                        HAS_MASK=False,
                        BLOCK_N=block_n,
                    )
                return out
    return _general(scores, divisor, index, table, (a, b, c), p)


def pattern(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7):
    tmp_0 = in_0 / in_1
    tmp_1 = in_2.view(-1)
    tmp_2 = in_3[tmp_1]
    tmp_3 = tmp_2.view(in_4, in_5, in_6)
    tmp_4 = tmp_3.permute(2, 0, 1)
    tmp_5 = tmp_4.contiguous()
    tmp_6 = tmp_5.unsqueeze(0)
    tmp_7 = tmp_0 + tmp_6
    tmp_8 = torch.nn.functional.softmax(tmp_7, dim=-1)
    tmp_9 = torch.nn.functional.dropout(tmp_8, in_7, False, False)
    return tmp_9


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7):
    return (in_0, in_1, in_2, in_3, in_4, in_5, in_6, in_7)


def replacement_func():
    return fused_rel_pos_bias_softmax_dropout
