"""FusedRMSNorm: matches T5's RMSNorm and equals eager in fp32/fp16/bf16."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

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

PASS, RULE = "rms_norm", "FusedRMSNorm"
T5 = "transformers-auto-model/google/t5-efficient-large-el2"


class _AccurateReducedRsqrt(TorchFunctionMode):
    """CPU eager computes fp16/bf16 ``rsqrt`` with a ~14-bit approximation (its vectorised
    path), so an fp16 rstd can round one ulp away from the fp32 ``rsqrt`` that CUDA eager
    and the kernel round. This mode computes that one op in fp32 and rounds it, as CUDA does."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.rsqrt and args[0].dtype in (torch.float16, torch.bfloat16):
            return torch.rsqrt(args[0].float()).to(args[0].dtype)
        return func(*args, **kwargs)


def _eager_with_accurate_rsqrt(module):
    def run(*inputs):
        with _AccurateReducedRsqrt():
            return module.pattern(*inputs)

    return run


def test_pattern_matches_every_rms_norm_of_t5(load_rule):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(T5))
    # Two encoder layers (attention + feed-forward norms) and the final norm.
    assert len(matches) == 5
    assert {(m.placeholder_nodes[2], m.placeholder_nodes[3]) for m in matches} == {
        (torch.float32, 1e-06)
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_replacement_equals_eager_on_real_t5_values(load_rule, device, dtype):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(T5, module.pattern), dtype))
    assert_replacement_matches(module, inputs, _eager_with_accurate_rsqrt(module))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 100), (3, 1000)], ids=["rows100", "rows1000"])
def test_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, shape):
    module = load_rule(PASS, RULE)
    weight, x, _, eps = captured_inputs(T5, module.pattern)
    gen = torch.Generator().manual_seed(1)
    inputs = [like(weight, shape[-1:], dtype, gen), like(x, shape, dtype, gen), dtype, eps]
    assert_replacement_matches(module, on(device, inputs), _eager_with_accurate_rsqrt(module))


def test_half_input_with_fp32_variance_promotes_like_eager(load_rule, device):
    # The unrewritten T5 graph in fp16: variance in fp32, result promoted to fp32.
    module = load_rule(PASS, RULE)
    weight, x, cast, eps = captured_inputs(T5, module.pattern)
    inputs = on(device, [weight.half(), x.half(), cast, eps])
    assert_replacement_matches(module, inputs)
    out = module.replacement_func()(*module.replacement_args(*inputs))
    assert out.dtype == torch.float32


@pytest.mark.parametrize(
    ("x_shape", "dtype", "cast_dtype"),
    [
        ((2**21, 1024), torch.float16, torch.float16),
        ((2**21, 1024), torch.float16, torch.float32),
        ((2, 2**30), torch.float32, torch.float32),
    ],
    ids=["fast-path-form", "mixed-dtypes", "long-rows"],
)
def test_tensors_of_2_31_elements_are_refused_before_any_launch(
    load_rule, launches, x_shape, dtype, cast_dtype
):
    # The kernel's offsets are int32: 2**31 elements would overflow them.
    module = load_rule(PASS, RULE)
    weight, x = meta(x_shape[-1], dtype=dtype), meta(*x_shape, dtype=dtype)
    with pytest.raises(ValueError, match=too_large(RULE, "x")):
        module.replacement_func()(*module.replacement_args(weight, x, cast_dtype, 1e-6))
    assert launches == []


def test_just_fewer_than_2_31_elements_take_the_fast_path(load_rule, launches, monkeypatch):
    module = load_rule(PASS, RULE)
    monkeypatch.setattr(module, "_general", general_path_not_taken)
    weight, x = meta(1024, dtype=torch.float16), meta(2**21 - 1, 1024, dtype=torch.float16)
    out = module.replacement_func()(*module.replacement_args(weight, x, torch.float16, 1e-6))
    assert launches == ["_rms_norm_kernel"]
    assert out.shape == x.shape and out.dtype == torch.float16
