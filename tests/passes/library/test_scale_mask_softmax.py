"""scale_mask_softmax: Swin's scaled, biased window-attention softmax (with the eval dropout, and
the shifted block's window mask added through views; the FusedRelPosBias rules also gather the
relative-position bias from its table): the rules match every site, equal eager."""

from __future__ import annotations

import operator
import re

import pytest
import torch
import torch.fx

from passnet.passes import PassManager
from passnet.passes.library import get_reference_pass
from passnet.sample import load_sample, trace_graph
from tests.passes.library.conftest import (
    DTYPES,
    assert_replacement_matches,
    captured_inputs,
    cast_floats,
    find_matches,
    general_path_not_taken,
    like,
    meta,
    on,
    sample_graph,
    sample_path,
    too_large,
)

PASS, RULE = "scale_mask_softmax", "FusedScaleMaskSoftmax"
SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"
SWIN_224 = "transformers-auto-model/yujiepan_tiny-random-swin-patch4-window7-224"


@pytest.mark.parametrize(
    ("sample", "expected"),
    # vuiseng9: the shifted block adds a window mask through views, a different pattern
    [(SWIN, 3), (SWIN_224, 4)],
    ids=["swin-tiny-random", "swin-224"],
)
def test_pattern_matches_window_attention_softmax(load_rule, sample, expected):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert all(isinstance(m.placeholder_nodes[2], float) for m in matches)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sample", [SWIN, SWIN_224], ids=["n4", "n49"])
def test_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype, sample):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(sample, module.pattern), dtype))
    assert inputs[1].shape[0] == 1  # the relative-position bias broadcasts over windows
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("scores_shape", "mask_shape", "divisor"),
    [((3, 4, 17, 17), (1, 4, 17, 17), 2.8284271247461903), ((2, 2, 8, 100), (2, 1, 1, 100), 8.0)],
    ids=["n17-bias", "n100-padding-mask"],
)
def test_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, scores_shape, mask_shape, divisor
):
    module = load_rule(PASS, RULE)
    scores, mask, _ = captured_inputs(SWIN_224, module.pattern)
    gen = torch.Generator().manual_seed(9)
    inputs = [like(scores, scores_shape, dtype, gen), like(mask, mask_shape, dtype, gen), divisor]
    assert_replacement_matches(module, on(device, inputs))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_fully_masked_rows_give_nan_like_eager(load_rule, device):
    module = load_rule(PASS, RULE)
    scores = torch.randn(1, 2, 3, 5, device=device)
    mask = torch.zeros(1, 1, 3, 5, device=device)
    mask[..., 1, :] = float("-inf")
    out = module.replacement_func()(*module.replacement_args(scores, mask, 2.0))
    assert out[..., 1, :].isnan().all() and out[..., 0, :].isfinite().all()
    assert_replacement_matches(module, [scores, mask, 2.0])


def test_tensor_divisor_is_refused(load_rule, device):
    module = load_rule(PASS, RULE)
    with pytest.raises(TypeError, match="numeric divisor"):
        module.replacement_func()(
            *on(device, [torch.randn(2, 4), torch.tensor(2.0), torch.zeros(2, 4)])
        )


# --- FusedScaleMaskSoftmaxDropout: the same softmax with the eval-mode dropout absorbed ---

DROPOUT = "FusedScaleMaskSoftmaxDropout"


@pytest.mark.parametrize(
    ("sample", "expected"), [(SWIN, 3), (SWIN_224, 4)], ids=["swin-tiny-random", "swin-224"]
)
def test_dropout_pattern_matches_every_unshifted_window_attention(load_rule, sample, expected):
    module = load_rule(PASS, DROPOUT)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert all(isinstance(m.placeholder_nodes[2], float) for m in matches)
    assert all(m.placeholder_nodes[3] == 0.0 for m in matches)  # p, bound to the literal


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sample", [SWIN, SWIN_224], ids=["n4", "n49"])
def test_dropout_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype, sample):
    module = load_rule(PASS, DROPOUT)
    for match in range(len(find_matches(module.pattern, sample_graph(sample)))):
        inputs = on(device, cast_floats(captured_inputs(sample, module.pattern, match), dtype))
        assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("scores_shape", "mask_shape", "divisor", "p"),
    [
        ((3, 4, 17, 17), (1, 4, 17, 17), 2.8284271247461903, 0.1),
        ((2, 2, 8, 100), (2, 1, 1, 100), 8, 0.0),
    ],
    ids=["n17-bias", "n100-padding-mask-int-divisor"],
)
def test_dropout_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, scores_shape, mask_shape, divisor, p
):
    module = load_rule(PASS, DROPOUT)
    scores, mask, _, _ = captured_inputs(SWIN_224, module.pattern)
    gen = torch.Generator().manual_seed(11)
    inputs = [
        like(scores, scores_shape, dtype, gen),
        like(mask, mask_shape, dtype, gen),
        divisor,
        p,
    ]
    assert_replacement_matches(module, on(device, inputs))


def test_dropout_replacement_checks_p_like_eager(load_rule, device):
    module = load_rule(PASS, DROPOUT)
    scores, mask = on(device, [torch.randn(2, 2, 3, 5), torch.randn(1, 2, 3, 5)])
    with pytest.raises(ValueError, match="dropout probability"):
        torch.nn.functional.dropout(scores, 1.5, False, False)
    with pytest.raises(ValueError, match="dropout probability"):
        module.replacement_func()(*module.replacement_args(scores, mask, 2.0, 1.5))


def test_base_rule_still_covers_a_softmax_without_eval_dropout(load_rule):
    def attention(scores, mask):
        probs = torch.nn.functional.softmax(scores / 8.0 + mask, dim=-1)
        return torch.nn.functional.dropout(probs, 0.1, True, False)  # training: not absorbed

    gm = torch.fx.symbolic_trace(attention)
    assert len(find_matches(load_rule(PASS, DROPOUT).pattern, gm)) == 0
    assert len(find_matches(load_rule(PASS, RULE).pattern, gm)) == 1


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (
            SWIN,
            {"FusedRelPosBiasSoftmaxDropout": 3, "FusedRelPosBiasShiftedWindowSoftmaxDropout": 1},
        ),
        (SWIN_224, {"FusedRelPosBiasSoftmaxDropout": 4}),
    ],
    ids=["swin-tiny-random", "swin-224"],
)
def test_pass_dir_replaces_every_attention_softmax_of_the_swin_samples(device, sample, expected):
    rules = get_reference_pass(PASS).rules
    assert rules == [  # larger patterns first
        "FusedRelPosBiasSoftmaxDropout",
        "FusedRelPosBiasShiftedWindowSoftmaxDropout",
        DROPOUT,
        "FusedShiftedWindowSoftmaxDropout",
        RULE,
    ]
    result = PassManager.from_dirs(get_reference_pass(PASS).folder).apply(
        trace_graph(load_sample(sample_path(sample)).build_module("cpu"))
    )
    assert result.report.replacements == {r: expected.get(r, 0) for r in rules}
    nodes = list(result.graph_module.graph.nodes)
    assert not [n for n in nodes if n.target is torch.nn.functional.softmax]
    # the relative-position bias gathers went with them: no table is indexed any more
    gathers = [n for n in nodes if n.target is operator.getitem and n.args[0].op == "placeholder"]
    assert not gathers


# --- FusedShiftedWindowSoftmaxDropout: the shifted block's window mask added through views ---

SHIFTED = "FusedShiftedWindowSoftmaxDropout"


def test_shifted_pattern_matches_the_shifted_window_block(load_rule):
    module = load_rule(PASS, SHIFTED)
    assert len(find_matches(module.pattern, sample_graph(SWIN_224))) == 0
    (match,) = find_matches(module.pattern, sample_graph(SWIN))
    # divisor, the constant window mask [1, W, 1, N, N], the two views' sizes, p
    assert match.placeholder_nodes[2] == 4.0
    assert match.placeholder_nodes[3].op == "get_attr"
    assert match.placeholder_nodes[4:] == [1, 16, 2, 4, 4, -1, 2, 4, 4, 0.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_shifted_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype):
    module = load_rule(PASS, SHIFTED)
    inputs = on(device, cast_floats(captured_inputs(SWIN, module.pattern), dtype))
    assert inputs[3].shape == (1, 16, 1, 4, 4) and set(inputs[3].unique().tolist()) == {0, -100}
    assert_replacement_matches(module, inputs)


def _window_mask(W, N, gen, dtype):
    """A shifted-window mask: 0 within a region, -100 across regions (as Swin builds it)."""
    region = torch.randint(0, 3, (W, N), generator=gen)
    return ((region[:, None, :] != region[:, :, None]) * -100.0).to(dtype)


def _mask_of_form(form, B, W, H, N, gen, dtype):
    """The window mask as the shifted rules' tests pass it: Swin's ``[1, W, 1, N, N]``, a
    ``[W, 1, N, N]`` broadcast, or a mask varying over images and heads ``[B, W, H, N, N]``."""
    mask = _window_mask(W, N, gen, dtype)
    if form == "swin":
        return mask.unsqueeze(1).unsqueeze(0)
    if form == "3d":
        return mask.unsqueeze(1)
    return (torch.randn(B, W, H, N, N, generator=gen) * 3).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("B", "W", "H", "N", "mask_form", "view_0", "divisor"),
    [
        (2, 4, 3, 49, "swin", 2, 5.656854249492381),  # Swin-T's window, two images
        (1, 4, 2, 9, "3d", -1, 8),  # mask [W, 1, N, N] broadcast, -1 view, int divisor
        (2, 2, 3, 5, "per-head", 2, 2.0),  # a mask that varies over images and heads
    ],
    ids=["n49-swin", "n9-broadcast-mask", "n5-full-mask"],
)
def test_shifted_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, B, W, H, N, mask_form, view_0, divisor
):
    module = load_rule(PASS, SHIFTED)
    scores, bias, _, _, *_ = captured_inputs(SWIN, module.pattern)
    gen = torch.Generator().manual_seed(5)
    mask = _mask_of_form(mask_form, B, W, H, N, gen, dtype)
    inputs = [
        like(scores, (B * W, H, N, N), dtype, gen),
        like(bias, (1, H, N, N), dtype, gen),
        divisor,
        mask,
        *(view_0, W, H, N, N),
        *(-1, H, N, N),
        0.0,
    ]
    assert_replacement_matches(module, on(device, inputs))


def test_shifted_replacement_refuses_views_it_does_not_implement(load_rule, device):
    module = load_rule(PASS, SHIFTED)
    scores, bias, mask = on(
        device, [torch.randn(4, 2, 4, 4), torch.randn(1, 2, 4, 4), torch.zeros(1, 4, 1, 4, 4)]
    )
    # softmax over rows of 8: not the rows the scores are read in
    args = module.replacement_args(scores, bias, 2.0, mask, 1, 4, 2, 4, 4, -1, 2, 2, 8, 0.0)
    with pytest.raises(ValueError, match="unsupported views"):
        module.replacement_func()(*args)


# --- FusedRelPosBiasSoftmaxDropout: the relative-position bias gathered inside the kernel ---

REL_POS = "FusedRelPosBiasSoftmaxDropout"
REL_POS_SHIFTED = "FusedRelPosBiasShiftedWindowSoftmaxDropout"


def _relative_position_index(w: int) -> torch.Tensor:
    """HF Swin's ``relative_position_index`` of a ``w x w`` window: ``[w*w, w*w]`` int64 in
    ``[0, (2w-1)^2)``."""
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij"))
    coords = coords.flatten(1)
    relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
    return relative[..., 0] * (2 * w - 1) + relative[..., 1]


def _fast_path_only(module, monkeypatch):
    def general(*args):
        raise AssertionError("the real case must take the fast path")

    monkeypatch.setattr(module, "_general", general)


def _table(rows: int, cols: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return (torch.randn(rows, cols, generator=gen) * 0.5).to(dtype)


@pytest.mark.parametrize(
    ("sample", "expected", "n"),
    [(SWIN, 3, 4), (SWIN_224, 4, 49)],
    ids=["swin-tiny-random", "swin-224"],
)
def test_rel_pos_pattern_matches_every_unshifted_window_attention(load_rule, sample, expected, n):
    module = load_rule(PASS, REL_POS)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    for m in matches:
        scores, divisor, index, table, *sizes, p = m.placeholder_nodes
        assert scores.target is torch.matmul and isinstance(divisor, float)
        assert index.op == "placeholder" and "relative_position_index" in index.name
        assert table.op == "placeholder" and "relative_position_bias_table" in table.name
        assert sizes == [n, n, -1] and p == 0.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sample", [SWIN, SWIN_224], ids=["n4", "n49"])
def test_rel_pos_replacement_equals_eager_on_real_swin_values(
    load_rule, device, dtype, sample, monkeypatch
):
    module = load_rule(PASS, REL_POS)
    _fast_path_only(module, monkeypatch)
    for match in range(len(find_matches(module.pattern, sample_graph(sample)))):
        inputs = on(device, cast_floats(captured_inputs(sample, module.pattern, match), dtype))
        assert inputs[2].dtype == torch.int64 and inputs[3].dtype == dtype
        assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "variant",
    [
        "swin-t",  # window 7 (N = 49), 3 heads, 8 windows: the fast path
        "int32-flat-index",  # an int32 [N*N] index, view (N, N, heads), an int divisor
        "heads-broadcast",  # a table of one column: the bias broadcast over 3 heads
        "queries-broadcast",  # an index of N entries viewed (1, N, -1): one bias row
        "fp32-table",  # the sum and the output promoted to float32
        "strided-operands",  # a transposed table and transposed scores, copied
        "negative-index",  # indices counting from the table's end, as eager reads them
        "larger-bias",  # scores [B, 1, N, N] broadcast to the bias's 2 heads
        "keys-broadcast",  # an index of N entries viewed (N, 1, -1): a bias [1, H, N, 1]
    ],
)
def test_rel_pos_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, variant):
    module = load_rule(PASS, REL_POS)
    real_scores = captured_inputs(SWIN_224, module.pattern)[0]
    gen = torch.Generator().manual_seed(13)
    w, B, H, divisor = (7, 8, 3, 5.656854249492381) if variant == "swin-t" else (3, 2, 2, 2.0)
    N, T = w * w, (2 * w - 1) ** 2
    scores = like(real_scores, (B, H, N, N), dtype, gen)
    index, table, sizes = _relative_position_index(w), _table(T, H, dtype, gen), (N, N, -1)
    if variant == "int32-flat-index":
        index, sizes, divisor = index.flatten().to(torch.int32), (N, N, H), 4
    elif variant == "heads-broadcast":
        table = _table(T, 1, dtype, gen)
    elif variant == "queries-broadcast":
        index, sizes = index[2], (1, N, -1)
    elif variant == "fp32-table":
        table = table.float()
    elif variant == "strided-operands":
        table = _table(H, T, dtype, gen).t()
        scores = scores.transpose(-1, -2)
        assert not table.is_contiguous() and not scores.is_contiguous()
    elif variant == "negative-index":
        index = torch.where(index % 2 == 0, index - T, index)
        assert int(index.min()) < 0
    elif variant == "larger-bias":
        scores = scores[:, :1]
    elif variant == "keys-broadcast":  # broadcast along the softmax dim
        index, sizes = index[:, 2].contiguous(), (N, 1, -1)
    inputs = [scores, divisor, index, table, *sizes, 0.0]
    assert_replacement_matches(module, on(device, inputs))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_rel_pos_out_of_range_index_gives_nan_rows_where_eager_raises(load_rule, device):
    module = load_rule(PASS, REL_POS)
    gen = torch.Generator().manual_seed(17)
    w, T = 2, 9
    index = _relative_position_index(w)
    index[1, 3] = T  # query 1 reads past the table's end (eager: IndexError)
    scores = torch.randn(3, 2, 4, 4, generator=gen)
    inputs = [scores, 2.0, index, _table(T, 2, torch.float32, gen), 4, 4, -1, 0.0]
    with pytest.raises(IndexError):  # on the CPU: on CUDA a device-side assert ends the process
        module.pattern(*inputs)
    inputs = on(device, inputs)
    out = module.replacement_func()(*module.replacement_args(*inputs))
    assert out[:, :, 1].isnan().all()
    inputs[2] = inputs[2].clone()
    inputs[2][1, 3] = 0
    rest = [0, 2, 3]
    torch.testing.assert_close(out[:, :, rest], module.pattern(*inputs)[:, :, rest])


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("bool-index", TypeError, "int64 or int32 index"),
        ("uint8-index", TypeError, "int64 or int32 index"),
        ("float-index", IndexError, "must be long, int, byte or bool tensors, got a torch.float32"),
        ("int16-index", IndexError, "must be long, int, byte or bool tensors, got a torch.int16"),
        ("transposed-index", RuntimeError, "view size is not compatible"),
        ("two-inferred-sizes", RuntimeError, "only one dimension can be inferred"),
        ("0d-scores", ValueError, "0-dim scores of torch.float32 with a torch.float16 table"),
        ("regrouped-view", ValueError, "split the 8 indices as \\[queries, keys\\]"),
        ("empty-table", IndexError, "empty table"),
        ("empty-index", ValueError, "empty gather"),
        ("0d-table", IndexError, "0-d table"),
        ("tensor-divisor", TypeError, "numeric divisor"),
        ("dropout-p", ValueError, "dropout probability"),
    ],
)
def test_rel_pos_replacement_refuses_what_the_kernel_does_not_implement(
    load_rule, device, case, error, message
):
    module = load_rule(PASS, REL_POS)
    gen = torch.Generator().manual_seed(19)
    scores, index = torch.randn(2, 2, 4, 4, generator=gen), _relative_position_index(2)
    table = _table(9, 2, torch.float32, gen)
    divisor, sizes, p = 2.0, (4, 4, -1), 0.0
    if case == "bool-index":
        index = index > 3
    elif case == "uint8-index":
        index = index.to(torch.uint8)
    elif case == "float-index":
        index = index.float()
        with pytest.raises(error, match="must be long, int, byte or bool tensors"):
            module.pattern(scores, divisor, index, table, *sizes, p)
    elif case == "regrouped-view":
        # eager views the gathered [8, 4] as [4, 4, 2]: each bias value mixes two indices
        index, table = index.flatten()[:8], _table(9, 4, torch.float32, gen)
        module.pattern(scores, divisor, index, table, *sizes, p)
    elif case == "int16-index":
        index = index.to(torch.int16)
    elif case in ("transposed-index", "two-inferred-sizes"):
        if case == "transposed-index":  # eager's index.view(-1) raises
            index = index.t()
        else:  # one index viewed (-1, -1, 2): eager's view raises
            scores, index, sizes = scores[:, :, :1, :1], index[:1, :1], (-1, -1, 2)
        with pytest.raises(error, match=message):
            module.pattern(scores, divisor, index, table, *sizes, p)
    elif case == "0d-scores":  # eager's sum takes the table's dtype: not modelled
        scores, table = torch.tensor(1.5), table.half()
    elif case == "empty-table":
        table = table[:0]
    elif case == "empty-index":
        index = index[:0]
    elif case == "0d-table":
        table = torch.tensor(1.0)
    elif case == "tensor-divisor":
        divisor = torch.tensor(2.0)
    elif case == "dropout-p":
        p = 1.5
    inputs = on(device, [scores, divisor, index, table, *sizes, p])
    with pytest.raises(error, match=message):
        module.replacement_func()(*module.replacement_args(*inputs))


@pytest.mark.gpu
def test_rel_pos_replacement_refuses_operands_on_two_devices(load_rule, device):
    if device != "cuda":
        pytest.skip("needs the scores on a GPU and the index on the CPU")
    module = load_rule(PASS, REL_POS)
    scores, table = on(device, [torch.randn(1, 2, 4, 4), torch.randn(9, 2)])
    inputs = [scores, 2.0, _relative_position_index(2), table, 4, 4, -1, 0.0]
    with pytest.raises(ValueError, match="on one device"):
        module.replacement_func()(*module.replacement_args(*inputs))


# --- FusedRelPosBiasShiftedWindowSoftmaxDropout: the same, with the shifted block's mask ---


def test_rel_pos_shifted_pattern_matches_the_shifted_window_block(load_rule):
    module = load_rule(PASS, REL_POS_SHIFTED)
    assert len(find_matches(module.pattern, sample_graph(SWIN_224))) == 0
    (match,) = find_matches(module.pattern, sample_graph(SWIN))
    scores, divisor, index, table, *sizes, mask = match.placeholder_nodes[:8]
    assert scores.target is torch.matmul and divisor == 4.0 and sizes == [4, 4, -1]
    assert "relative_position_index" in index.name and "relative_position_bias_table" in table.name
    assert mask.op == "get_attr"  # the constant window mask [1, W, 1, N, N]
    assert match.placeholder_nodes[8:] == [1, 16, 2, 4, 4, -1, 2, 4, 4, 0.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_rel_pos_shifted_replacement_equals_eager_on_real_swin_values(
    load_rule, device, dtype, monkeypatch
):
    module = load_rule(PASS, REL_POS_SHIFTED)
    _fast_path_only(module, monkeypatch)
    inputs = on(device, cast_floats(captured_inputs(SWIN, module.pattern), dtype))
    assert inputs[7].shape == (1, 16, 1, 4, 4) and set(inputs[7].unique().tolist()) == {0, -100}
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("B", "W", "H", "w", "mask_form", "view_0", "divisor", "table_dtype"),
    [
        (2, 4, 3, 7, "swin", 2, 5.656854249492381, None),  # Swin-T's window: the fast path
        (1, 4, 2, 3, "3d", -1, 8, None),  # mask [W, 1, N, N] broadcast, -1 view, int divisor
        (2, 2, 3, 2, "per-head", 2, 2.0, None),  # a mask that varies over images and heads
        (1, 2, 2, 3, "swin", 1, 2.0, torch.float32),  # a float32 table: promoted sums
    ],
    ids=["n49-swin", "n9-broadcast-mask", "n4-full-mask", "n9-fp32-table"],
)
def test_rel_pos_shifted_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, B, W, H, w, mask_form, view_0, divisor, table_dtype
):
    module = load_rule(PASS, REL_POS_SHIFTED)
    real_scores = captured_inputs(SWIN, module.pattern)[0]
    gen = torch.Generator().manual_seed(23)
    N = w * w
    mask = _mask_of_form(mask_form, B, W, H, N, gen, dtype)
    inputs = [
        like(real_scores, (B * W, H, N, N), dtype, gen),
        divisor,
        _relative_position_index(w),
        _table((2 * w - 1) ** 2, H, table_dtype or dtype, gen),
        *(N, N, -1),
        mask,
        *(view_0, W, H, N, N),
        *(-1, H, N, N),
        0.0,
    ]
    assert_replacement_matches(module, on(device, inputs))


def test_rel_pos_shifted_replacement_refuses_what_it_does_not_implement(load_rule, device):
    module = load_rule(PASS, REL_POS_SHIFTED)
    scores, index, table, mask = on(
        device,
        [
            torch.randn(4, 2, 4, 4),
            _relative_position_index(2),
            torch.randn(9, 2),
            torch.zeros(1, 4, 1, 4, 4),
        ],
    )
    bias = (scores, 2.0, index, table, 4, 4, -1)
    # softmax over rows of 8: not the rows the scores are read in
    args = module.replacement_args(*bias, mask, 1, 4, 2, 4, 4, -1, 2, 2, 8, 0.0)
    with pytest.raises(ValueError, match="unsupported views"):
        module.replacement_func()(*args)
    args = module.replacement_args(*bias, None, 1, 4, 2, 4, 4, -1, 2, 4, 4, 0.0)
    with pytest.raises(TypeError, match="tensor window mask"):
        module.replacement_func()(*args)
    args = module.replacement_args(
        *bias[:2], index > 0, *bias[3:], mask, 1, 4, 2, 4, 4, -1, 2, 4, 4, 0.0
    )
    with pytest.raises(TypeError, match="int64 or int32 index"):
        module.replacement_func()(*args)


def test_rel_pos_general_path_runs_under_the_dispatch_guard(load_rule, device):
    """The general path's eager checks (index.view(-1), the bias view on a meta tensor) and
    its copies reach ATen only through ops the guard allows."""
    from passnet.passes.integrity import DispatchGuard

    guard = DispatchGuard()
    gen = torch.Generator().manual_seed(29)
    N, H, B, W = 4, 2, 2, 3
    index, table = _relative_position_index(2), torch.randn(H, 9, generator=gen).t()
    scores = torch.randn(B * W, H, N, N, generator=gen).transpose(-1, -2)
    mask = torch.randn(1, W, 1, N, N, generator=gen)
    cases = [
        (REL_POS, [scores, 3, index.int(), table, N, N, -1, 0]),
        (REL_POS, [scores, 2.0, index[:, 1].contiguous(), table, N, 1, -1, 0.0]),
        (
            REL_POS_SHIFTED,
            [scores, 3, index, table, N, N, -1, mask, B, W, H, N, N, -1, H, N, N, 0],
        ),
    ]
    for rule, inputs in cases:
        module = load_rule(PASS, rule)
        inputs = on(device, inputs)
        with torch.no_grad(), guard.checking():
            actual = guard.call(rule, module.replacement_func(), module.replacement_args(*inputs))
        expected = module.pattern(*inputs)
        torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-5)
    with guard.checking():  # eager's view checks raise as eager's own errors
        module = load_rule(PASS, REL_POS)
        inputs = on(device, [scores, 2.0, index.t(), table, N, N, -1, 0.0])
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            guard.call(REL_POS, module.replacement_func(), module.replacement_args(*inputs))


@pytest.mark.parametrize(
    ("rule", "operand"),
    [
        (RULE, "mask"),
        ("FusedShiftedWindowSoftmaxDropout", "mask"),
        ("FusedShiftedWindowSoftmaxDropout", "bias"),
        (REL_POS_SHIFTED, "window mask"),
    ],
)
def test_zero_dim_operand_of_another_dtype_is_refused(load_rule, device, rule, operand):
    """Eager lets a 0-dim operand defer to the dimensioned one's dtype (a float32 0-dim mask
    with float16 scores gives float16); the rules refuse it rather than promote by dtype."""
    module = load_rule(PASS, rule)
    gen = torch.Generator().manual_seed(31)
    scores = torch.randn(6, 2, 4, 4, generator=gen).half()
    zero = torch.tensor(-1.0)
    views = (2, 3, 2, 4, 4, -1, 2, 4, 4, 0.0)
    if rule == RULE:
        inputs = [scores, zero, 2.0]
    elif rule == REL_POS_SHIFTED:
        table = _table(9, 2, torch.float16, gen)
        inputs = [scores, 2.0, _relative_position_index(2), table, 4, 4, -1, zero, *views]
    else:
        bias = torch.randn(1, 2, 4, 4, generator=gen).half()
        mask = torch.randn(1, 3, 1, 4, 4, generator=gen).half()
        bias, mask = (zero, mask) if operand == "bias" else (bias, zero)
        inputs = [scores, bias, 2.0, mask, *views]
    assert module.pattern(*inputs).dtype == torch.float16
    inputs = on(device, inputs)
    with pytest.raises(ValueError, match=f"{rule}: a 0-dim {operand} of torch.float32"):
        module.replacement_func()(*module.replacement_args(*inputs))


# --- tensors of 2**31 or more elements: the kernels' int32 offsets cannot index them ---


def _meta_inputs(rule, B, dtype=torch.float16, divisor=8.0):
    """Pattern inputs of ``rule`` on the meta device (no memory): scores [B * 64, 4, 64, 64]
    (64 windows of 8x8 tokens, 4 heads), every other tensor of the real sites' form."""
    W, H, N = 64, 4, 64
    scores = meta(B * W, H, N, N, dtype=dtype)
    views = (B, W, H, N, N, -1, H, N, N, 0.0)
    index, table = meta(N, N, dtype=torch.int64), meta(225, H, dtype=dtype)
    if rule == RULE:
        return [scores, meta(1, H, N, N, dtype=dtype), divisor]
    if rule == DROPOUT:
        return [scores, meta(1, H, N, N, dtype=dtype), divisor, 0.0]
    if rule == SHIFTED:
        mask = meta(1, W, 1, N, N, dtype=dtype)
        return [scores, meta(1, H, N, N, dtype=dtype), divisor, mask, *views]
    if rule == REL_POS:
        return [scores, divisor, index, table, N, N, -1, 0.0]
    mask = meta(1, W, 1, N, N, dtype=dtype)
    return [scores, divisor, index, table, N, N, -1, mask, *views]


ALL_RULES = [RULE, DROPOUT, SHIFTED, REL_POS, REL_POS_SHIFTED]


@pytest.mark.parametrize("divisor", [8.0, 8], ids=["fast-path-form", "int-divisor"])
@pytest.mark.parametrize("rule", ALL_RULES)
def test_scores_of_2_31_elements_are_refused_before_any_launch(load_rule, launches, rule, divisor):
    # The kernels' offsets are int32: 2**31 elements would overflow them.
    module = load_rule(PASS, rule)
    inputs = _meta_inputs(rule, 2**11, divisor=divisor)
    assert inputs[0].numel() == 2**31
    with pytest.raises(ValueError, match=too_large(rule, "scores")):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


@pytest.mark.parametrize("rule", [RULE, DROPOUT])
def test_padding_mask_with_scores_of_2_31_elements_is_refused(load_rule, launches, rule):
    # BERT's padding mask [B, 1, 1, S]: the kernel that reads the mask through strides
    module = load_rule(PASS, rule)
    scores, mask = meta(2**17, 4, 64, 64), meta(2**17, 1, 1, 64)
    inputs = [scores, mask, 8.0] + ([0.0] if rule == DROPOUT else [])
    with pytest.raises(ValueError, match=too_large(rule, "scores")):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


@pytest.mark.parametrize("rule", [RULE, DROPOUT])
def test_mask_strides_reaching_2_31_are_refused(load_rule, launches, rule):
    # A mask of 192 elements whose batch stride of 2**30 puts its last row past offset 2**31:
    # the strided kernel computes that offset in int32.
    module = load_rule(PASS, rule)
    scores = meta(3, 4, 64, 64)
    mask = torch.empty_strided((3, 1, 1, 64), (2**30, 64, 64, 1), device="meta")
    inputs = [scores, mask, 8.0] + ([0.0] if rule == DROPOUT else [])
    message = (
        f"{rule}: offsets of 2**31 or more are not supported (int32 offsets); got mask of shape "
        f"(3, 1, 1, 64) and strides (1073741824, 64, 64, 1), reaching offset {2 * 2**30 + 63}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


@pytest.mark.parametrize("rule", [REL_POS, REL_POS_SHIFTED])
def test_rel_pos_table_of_2_31_elements_is_refused(load_rule, launches, rule):
    module = load_rule(PASS, rule)
    inputs = _meta_inputs(rule, 1)
    inputs[3] = meta(2**29, 4, dtype=torch.float16)  # the table
    with pytest.raises(ValueError, match=too_large(rule, "table")):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


@pytest.mark.parametrize(
    ("rule", "kernel"),
    [
        (RULE, "_scale_mask_softmax_kernel"),
        (DROPOUT, "_scale_mask_softmax_kernel"),
        (SHIFTED, "_shifted_window_softmax_kernel"),
        (REL_POS, "_rel_pos_bias_softmax_kernel"),
        (REL_POS_SHIFTED, "_rel_pos_bias_softmax_kernel"),
    ],
)
def test_just_fewer_than_2_31_elements_take_the_fast_path(
    load_rule, launches, monkeypatch, rule, kernel
):
    module = load_rule(PASS, rule)
    if rule == DROPOUT:  # the dropout rule runs FusedScaleMaskSoftmax's wrapper
        general_globals = module.fused_scale_mask_softmax.__globals__
        monkeypatch.setitem(general_globals, "_general", general_path_not_taken)
    else:
        monkeypatch.setattr(module, "_general", general_path_not_taken)
    inputs = _meta_inputs(rule, 2**11 - 1)
    out = module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == [kernel]
    assert out.shape == inputs[0].shape and out.dtype == torch.float16
