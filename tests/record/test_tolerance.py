"""Tolerance tables atol(t), rtol(t) (GraphNet appendix A, PassNet appendix F)."""

from __future__ import annotations

import math

import pytest
import torch

from passnet.record import TOLERANCE_LEVELS, baseline_tolerance, log_key, tolerance


@pytest.mark.parametrize(
    "dtype, key",
    [
        (torch.float32, "all_close_atol_1.00E-05_rtol_1.30E-06"),
        (torch.float16, "all_close_atol_1.00E-05_rtol_1.00E-03"),
        (torch.bfloat16, "all_close_atol_1.00E-05_rtol_1.60E-02"),
    ],
)
def test_baseline_gives_the_passnet_seed_table_keys(dtype, key):
    assert tolerance(dtype, -5) == baseline_tolerance(dtype)
    assert log_key(*baseline_tolerance(dtype)) == key


def test_baseline_values_match_the_seed_table():
    assert baseline_tolerance(torch.float32) == pytest.approx((1e-5, 1.3e-6), rel=1e-3)
    assert baseline_tolerance(torch.float16) == pytest.approx((1e-5, 1e-3))
    assert baseline_tolerance(torch.bfloat16) == pytest.approx((1e-5, 1.6e-2), rel=1e-3)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_fp64_uses_slope_7_over_5_for_both_tolerances(dtype):
    assert tolerance(dtype, -5) == pytest.approx((1e-7, 1e-7))
    for t in (-10, -3, -1):
        atol, rtol = tolerance(dtype, t)
        assert math.log10(atol) == pytest.approx(1.4 * t)
        assert math.log10(rtol) == pytest.approx(1.4 * t)


def test_lg_tolerances_are_linear_in_t_with_per_dtype_slopes():
    slopes = {torch.float16: 0.6, torch.bfloat16: 0.3592, torch.float32: 1.1772}
    for dtype, slope in slopes.items():
        for t in TOLERANCE_LEVELS:
            atol, rtol = tolerance(dtype, t)
            assert math.log10(atol) == pytest.approx(t, abs=1e-12)
            assert math.log10(rtol) == pytest.approx(slope * t, abs=1e-12)
        assert tolerance(dtype, 0) == (1.0, 1.0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_integer_and_bool_outputs_must_be_equal(dtype):
    assert all(tolerance(dtype, t) == (0.0, 0.0) for t in range(-10, 6))


def test_levels_above_one_reuse_the_t1_tolerance():
    assert TOLERANCE_LEVELS == tuple(range(-10, 2))
    for t in (2, 3, 4, 5):
        assert tolerance(torch.float32, t) == tolerance(torch.float32, 1)


def test_complex_dtypes_follow_their_real_counterparts():
    assert tolerance(torch.complex64, -5) == tolerance(torch.float32, -5)
    assert tolerance(torch.complex32, -5) == tolerance(torch.float16, -5)
