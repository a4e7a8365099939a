"""add_layer_norm: FusedLinearAddLayerNorm (linear + eval dropout + residual add +
LayerNorm) and FusedAddLayerNorm (residual add + LayerNorm) match the BERT-style blocks
and equal eager.

In fp16/bf16 eager rounds the linear result before the residual add, and so does the
kernel. Where the exact linear result lies within fp32 accumulation error of a rounding
boundary, the order of the fp32 sum (BLAS or Triton, CPU or GPU: none is canonical)
decides which of two neighbouring values is added, and after the LayerNorm the two
outputs are further apart than the fp16 tolerance (the flip also moves the row's mean
and variance). Rows holding such a value are checked against eager with the tied
values taken either way; every other row against eager at the baseline tolerance (as
in test_linear_bias_gelu.py).
"""

from __future__ import annotations

import pytest
import torch

from passnet.data import dev_samples_dir
from passnet.passes import PassManager
from passnet.passes.library import get_reference_pass
from passnet.record import baseline_tolerance
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
    too_large,
)

PASS, RULE, LINEAR_RULE = "add_layer_norm", "FusedAddLayerNorm", "FusedLinearAddLayerNorm"
BERT_TINY = "transformers-auto-model/prajjwal1_bert-tiny"
TINYBERT = "transformers-auto-model/ms-marco-TinyBERT-L2"
BGE = "transformers-auto-model/bge-small-zh"
SAMPLES = [BERT_TINY, TINYBERT, BGE]
SAMPLE_IDS = ["bert-tiny", "tinybert", "bge"]


def test_the_linear_rule_is_applied_first():
    assert get_reference_pass(PASS).rules == [LINEAR_RULE, RULE]


@pytest.mark.parametrize(
    ("sample", "expected"),
    # embeddings + (attention output, feed-forward output) per encoder layer
    [(BERT_TINY, 5), (TINYBERT, 5), (BGE, 9)],
    ids=SAMPLE_IDS,
)
def test_pattern_matches_every_add_layer_norm_of_bert_samples(load_rule, sample, expected):
    # On the traced graph, before FusedLinearAddLayerNorm takes the encoder's blocks.
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert {m.placeholder_nodes[5] for m in matches} == {1e-12}


@pytest.mark.parametrize(
    ("sample", "expected"),
    # (attention output, feed-forward output) per encoder layer
    [(BERT_TINY, 4), (TINYBERT, 4), (BGE, 8)],
    ids=SAMPLE_IDS,
)
def test_linear_rule_matches_every_self_output_and_output(load_rule, sample, expected):
    module = load_rule(PASS, LINEAR_RULE)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert {m.placeholder_nodes[3] for m in matches} == {0.1}  # dropout p
    assert {m.placeholder_nodes[8] for m in matches} == {1e-12}


@pytest.mark.parametrize("sample", SAMPLES, ids=SAMPLE_IDS)
def test_pass_manager_leaves_only_the_embeddings_to_the_add_rule(sample):
    manager = PassManager.from_dirs(get_reference_pass(PASS).folder)
    module = load_sample(dev_samples_dir() / sample).build_module("cpu")
    report = manager.apply(trace_graph(module)).report
    expected = {BERT_TINY: 4, TINYBERT: 4, BGE: 8}[sample]
    assert report.replacements[LINEAR_RULE] == expected
    assert report.replacements[RULE] == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("match", [0, 1], ids=["embeddings-broadcast", "residual"])
def test_replacement_equals_eager_on_real_tinybert_values(load_rule, device, dtype, match):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(TINYBERT, module.pattern, match), dtype))
    if match == 0:  # position embeddings [1, S, D] broadcast over the batch of 2
        assert inputs[3].shape[0] == 1 and inputs[2].shape[0] == 2
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(2, 9, 100), (4, 33, 768), (2, 3, 5000)], ids=["d100", "d768", "d5000-long-rows"]
)
def test_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, shape):
    module = load_rule(PASS, RULE)
    bias, weight, a, b, _, eps = captured_inputs(TINYBERT, module.pattern, 1)
    gen = torch.Generator().manual_seed(4)
    D = shape[-1]
    inputs = [
        like(bias, (D,), dtype, gen),
        like(weight, (D,), dtype, gen),
        like(a, shape, dtype, gen),
        like(b, shape, dtype, gen),
        (D,),
        eps,
    ]
    assert_replacement_matches(module, on(device, inputs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_affine_parameters_and_a_scalar_operand_follow_eager(load_rule, device, dtype):
    module = load_rule(PASS, RULE)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 50, generator=gen).to(dtype).to(device)
    assert_replacement_matches(module, [None, None, x, 0.5, (50,), 1e-5])
    assert_replacement_matches(module, [None, None, 0.5, x, (50,), 1e-5])


def test_mixed_dtypes_promote_like_eager(load_rule, device):
    module = load_rule(PASS, RULE)
    gen = torch.Generator().manual_seed(6)
    a = torch.randn(2, 5, 64, generator=gen).half()
    b = torch.randn(2, 5, 64, generator=gen)
    w, bias = torch.ones(64), torch.zeros(64)
    assert_replacement_matches(module, on(device, [bias, w, a, b, (64,), 1e-5]))


def test_two_dim_normalized_shape_over_a_transposed_operand(load_rule, device):
    module = load_rule(PASS, RULE)
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(3, 6, 10, generator=gen)
    b = torch.randn(3, 10, 6, generator=gen).transpose(1, 2)
    w, bias = torch.randn(6, 10, generator=gen), torch.randn(6, 10, generator=gen)
    assert_replacement_matches(module, on(device, [bias, w, a, b, (6, 10), 1e-5]))


def _assert_linear_rule_matches_eager(module, inputs):
    """The replacement equals eager; in fp16/bf16 a row holding a rounding tie of the
    linear result may instead equal eager with one of its tied values, or all of them,
    taken the other way."""
    bias, weight, x, p, residual, ns, ln_w, ln_b, eps = inputs
    if x.dtype == torch.float32:
        assert_replacement_matches(module, inputs)
        return
    F = torch.nn.functional
    with torch.no_grad():
        expected = module.pattern(*inputs)
        actual = module.replacement_func()(*module.replacement_args(*inputs))
        h = torch._C._nn.linear(x, weight, bias)
        x64, w64 = x.double(), weight.double()
        b64 = bias.double() if bias is not None else x64.new_zeros(w64.shape[0])
        exact = F.linear(x64, w64, b64)
        # How far an fp32 sum of the K products can land from the exact value (see
        # test_linear_bias_gelu.py); the band is four times that.
        K = x.shape[-1]
        spread = ((x64**2 @ (w64**2).T) * (K + 1) / 2).sqrt() + b64.abs()
        band = 4 * 2.0**-24 * spread
        low, high = (exact - band).to(x.dtype), (exact + band).to(x.dtype)
        tie = low != high
        other = torch.where(tie, torch.where(h == low, high, low), h)
        # Sums with every tied value flipped, and with one flipped (a row per tie).
        N = expected.shape[-1]
        assert tuple(ns) == (N,) and h.shape == expected.shape
        s, s_other = (h + residual).reshape(-1, N), (other + residual).reshape(-1, N)
        rows, cols = tie.reshape(-1, N).nonzero(as_tuple=True)
        one_flip = s[rows].clone()
        one_flip[torch.arange(len(rows)), cols] = s_other[rows, cols]
        all_flipped = F.layer_norm(s_other, ns, ln_w, ln_b, eps)
        one_flipped = F.layer_norm(one_flip, ns, ln_w, ln_b, eps)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    atol, rtol = baseline_tolerance(expected.dtype)
    got = actual.double().reshape(-1, N)

    def close(value, reference):
        ref = reference.double()
        return (value - ref).abs() <= atol + rtol * ref.abs()

    # A flipped value moves its row's mean and variance: the whole row follows the flip.
    ok = close(got, expected.reshape(-1, N)) | close(got, all_flipped) & tie.reshape(-1, N).any(
        -1, keepdim=True
    )
    ok.index_put_((rows,), close(got[rows], one_flipped), accumulate=True)
    assert ok.all(), f"{(~ok).sum().item()} elements differ from eager beyond rounding ties"
    # bge-small-zh's feed-forward output (K = 2048) has 9% of its fp16 values in the band
    assert tie.double().mean() < 0.15, "the band is too wide to check anything"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("sample", "match"),
    # TinyBERT and bge-small-zh's 512x512 weight: the fused kernel; bge-small-zh's
    # 512x2048 weight: the tiled GEMM + LayerNorm kernels
    [(TINYBERT, 0), (TINYBERT, 1), (BGE, 0), (BGE, 1)],
    ids=["tinybert-attention", "tinybert-ffn", "bge-attention", "bge-ffn"],
)
def test_linear_rule_equals_eager_on_real_values(load_rule, device, dtype, sample, match):
    module = load_rule(PASS, LINEAR_RULE)
    inputs = on(device, cast_floats(captured_inputs(sample, module.pattern, match), dtype))
    _assert_linear_rule_matches_eager(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("x_shape", "n_out"),
    [((2, 9, 300), 100), ((1, 5, 40), 10), ((70, 256), 384), ((2, 33, 64), 768)],
    ids=["d100-batch2", "d10", "m70-d384-tiled", "d768-tiled"],
)
def test_linear_rule_equals_eager_on_other_shapes(load_rule, device, dtype, x_shape, n_out):
    module = load_rule(PASS, LINEAR_RULE)
    bias, weight, x, p, residual, _, ln_w, ln_b, eps = captured_inputs(TINYBERT, module.pattern, 1)
    gen = torch.Generator().manual_seed(9)
    K, D = x_shape[-1], n_out
    inputs = [
        like(bias, (D,), dtype, gen),
        like(weight, (D, K), dtype, gen),
        like(x, x_shape, dtype, gen),
        p,
        like(residual, (*x_shape[:-1], D), dtype, gen),
        (D,),
        like(ln_w, (D,), dtype, gen),
        like(ln_b, (D,), dtype, gen),
        eps,
    ]
    _assert_linear_rule_matches_eager(module, on(device, inputs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_rule_general_cases_follow_eager(load_rule, device, dtype):
    module = load_rule(PASS, LINEAR_RULE)
    gen = torch.Generator().manual_seed(10)

    def rand(*shape, dt=dtype):
        return torch.randn(shape, generator=gen).to(dt).to(device)

    x, w, b = rand(2, 6, 48), rand(40, 48), rand(40)
    ln_w, ln_b = rand(40), rand(40)
    # residual broadcast over the batch; a non-contiguous x; no linear bias and no affine
    # LayerNorm; a residual that is a number; a 1-d x
    _assert_linear_rule_matches_eager(
        module, [b, w, x, 0.1, rand(1, 6, 40), (40,), ln_w, ln_b, 1e-5]
    )
    xt = rand(2, 48, 6).transpose(1, 2)
    _assert_linear_rule_matches_eager(
        module, [b, w, xt, 0.1, rand(2, 6, 40), (40,), ln_w, ln_b, 1e-5]
    )
    _assert_linear_rule_matches_eager(
        module, [None, w, x, 0.0, rand(2, 6, 40), (40,), None, None, 1e-5]
    )
    _assert_linear_rule_matches_eager(module, [b, w, x, 0.5, 0.25, (40,), ln_w, ln_b, 1e-5])
    _assert_linear_rule_matches_eager(
        module, [b, w, rand(48), 0.1, rand(40), (40,), ln_w, ln_b, 1e-5]
    )


def test_linear_rule_mixed_dtypes_and_a_two_dim_normalized_shape(load_rule, device):
    module = load_rule(PASS, LINEAR_RULE)
    gen = torch.Generator().manual_seed(11)
    x, w, b = (torch.randn(s, generator=gen) for s in [(2, 6, 48), (40, 48), (40,)])
    # an fp16 linear plus an fp32 residual: the sum and the output are fp32
    inputs = [b.half(), w.half(), x.half(), 0.1, torch.randn(2, 6, 40, generator=gen)]
    assert_replacement_matches(module, on(device, [*inputs, (40,), None, None, 1e-5]))
    # LayerNorm over the last two dims of the sum
    ln_w, ln_b = torch.randn(6, 40, generator=gen), torch.randn(6, 40, generator=gen)
    r = torch.randn(2, 6, 40, generator=gen)
    assert_replacement_matches(module, on(device, [b, w, x, 0.1, r, (6, 40), ln_w, ln_b, 1e-5]))


def test_linear_rule_refuses_what_eager_refuses(load_rule, device):
    module = load_rule(PASS, LINEAR_RULE)
    bias, weight, x, p, residual, ns, ln_w, ln_b, eps = captured_inputs(TINYBERT, module.pattern, 0)
    run = module.replacement_func()
    with pytest.raises(ValueError, match="dropout probability"):
        run(*on(device, [x, weight, bias, residual, 1.5, ns, ln_w, ln_b, eps]))
    with pytest.raises(TypeError, match="one dtype"):
        run(*on(device, [x.half(), weight, bias, residual, p, ns, ln_w, ln_b, eps]))


def test_operands_that_do_not_broadcast_are_refused_naming_the_rule(load_rule, device):
    gen = torch.Generator().manual_seed(9)
    run = load_rule(PASS, RULE).replacement_func()
    a, b = torch.randn(2, 5, 64, generator=gen), torch.randn(3, 5, 64, generator=gen)
    with pytest.raises(ValueError, match=r"^FusedAddLayerNorm: shapes .* do not broadcast"):
        run(*on(device, [a, b, (64,), torch.ones(64), torch.zeros(64), 1e-5]))
    run = load_rule(PASS, LINEAR_RULE).replacement_func()
    x, w, bias = torch.randn(2, 5, 32, generator=gen), torch.randn(64, 32), torch.zeros(64)
    with pytest.raises(ValueError, match=r"^FusedLinearAddLayerNorm: shapes .* do not broadcast"):
        run(*on(device, [x, w, bias, b, 0.1, (64,), torch.ones(64), torch.zeros(64), 1e-5]))


# --- tensors of 2**31 or more elements: the kernels' int32 offsets cannot index them ---

H = torch.float16


@pytest.mark.parametrize(
    ("a", "b", "name"),
    [
        (meta(2**21, 1024, dtype=H), meta(2**21, 1024, dtype=H), "a"),
        (meta(2**21, 1024, dtype=H), meta(1, 1024, dtype=H), "a"),  # position embeddings
        (meta(2**21, 1024, dtype=H), meta(2**21, 1024), "a"),  # mixed dtypes
        (meta(2**21, 1024, dtype=H), 0.5, "a"),
        (0.5, meta(2**21, 1024, dtype=H), "b"),
        (meta(1, 1024, dtype=H), meta(2**21, 1024, dtype=H), "b"),  # a broadcast to b
    ],
    ids=["fast-path-form", "broadcast-b", "mixed-dtypes", "number-b", "number-a", "broadcast-a"],
)
def test_add_rule_refuses_2_31_elements_before_any_launch(load_rule, launches, a, b, name):
    module = load_rule(PASS, RULE)
    w, bias = meta(1024, dtype=H), meta(1024, dtype=H)
    with pytest.raises(ValueError, match=too_large(RULE, name)):
        module.replacement_func()(*module.replacement_args(bias, w, a, b, (1024,), 1e-12))
    assert launches == []


def test_add_rule_takes_the_fast_path_just_below_2_31_elements(load_rule, launches, monkeypatch):
    module = load_rule(PASS, RULE)
    monkeypatch.setattr(module, "_add_layer_norm_general", general_path_not_taken)
    a, b = meta(2**21 - 1, 1024, dtype=H), meta(1, 1024, dtype=H)
    w, bias = meta(1024, dtype=H), meta(1024, dtype=H)
    out = module.replacement_func()(*module.replacement_args(bias, w, a, b, (1024,), 1e-12))
    assert launches == ["_add_layer_norm_kernel"]
    assert out.shape == a.shape and out.dtype == H


@pytest.mark.parametrize(
    ("x_shape", "n_out", "name", "numel"),
    [
        ((2**23, 256), 256, "x", 2**31),  # the fused kernel's form
        ((2**21, 64), 1024, "residual", 2**31),  # the tiled GEMM's form
        ((4, 2**27), 16, "weight", 2**31),  # a weight of 2**31 elements
        ((2, 2**20, 64), 1024, "residual", 2**31),  # 3-d, the residual broadcast below
    ],
    ids=["fused", "tiled", "weight", "broadcast-residual"],
)
def test_linear_rule_refuses_2_31_elements_before_any_launch(
    load_rule, launches, x_shape, n_out, name, numel
):
    module = load_rule(PASS, LINEAR_RULE)
    K, N = x_shape[-1], n_out
    residual_shape = (1, *x_shape[1:-1], N) if len(x_shape) == 3 else (*x_shape[:-1], N)
    x, w, bias = meta(*x_shape, dtype=H), meta(N, K, dtype=H), meta(N, dtype=H)
    residual, ln_w, ln_b = meta(*residual_shape, dtype=H), meta(N, dtype=H), meta(N, dtype=H)
    inputs = [bias, w, x, 0.1, residual, (N,), ln_w, ln_b, 1e-12]
    with pytest.raises(ValueError, match=too_large(LINEAR_RULE, name, numel)):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


@pytest.mark.parametrize(
    ("M", "K", "N", "kernels", "fast"),
    [
        (2**20, 256, 256, ["_fused_kernel_interp"], True),
        (2**16, 64, 768, ["_linear_add_kernel_interp", "_layer_norm_kernel"], True),
        # past the fast path's bound (M + N) * (N + K) < 2**31, but every tensor below 2**31
        # elements: the general path runs it
        (2**20, 1024, 1024, ["_linear_add_kernel_interp", "_layer_norm_kernel"], False),
    ],
    ids=["fused", "tiled", "general-below-the-limit"],
)
def test_linear_rule_launches_below_2_31_elements(
    load_rule, launches, monkeypatch, M, K, N, kernels, fast
):
    module = load_rule(PASS, LINEAR_RULE)
    if fast:
        monkeypatch.setattr(module, "_general", general_path_not_taken)
    x, w, bias = meta(M, K, dtype=H), meta(N, K, dtype=H), meta(N, dtype=H)
    residual, ln_w, ln_b = meta(M, N, dtype=H), meta(N, dtype=H), meta(N, dtype=H)
    inputs = [bias, w, x, 0.1, residual, (N,), ln_w, ln_b, 1e-12]
    out = module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == kernels  # meta tensors are not on CUDA: the interpreter's variants
    assert out.shape == (M, N) and out.dtype == H
