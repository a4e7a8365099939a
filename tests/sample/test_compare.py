"""The one output comparator: structure first, then allclose at every tolerance level."""

from __future__ import annotations

import math

import pytest
import torch

from passnet.record import BASELINE_T, TOLERANCE_LEVELS, tolerance
from passnet.sample import compare_outputs
from passnet.status import Status


def test_outputs_beyond_the_baseline_tolerance_are_accuracy_and_name_the_difference() -> None:
    expected = [torch.zeros(4)]
    found = compare_outputs([torch.full((4,), 0.5)], expected)
    assert found.status is Status.ACCURACY
    assert not found.allclose[BASELINE_T] and found.allclose[1]  # atol 10 at t = 1
    assert found.max_diff == 0.5 and "max_diff 0.5" in found.message


def test_outputs_within_the_baseline_tolerance_are_ok() -> None:
    atol, _ = tolerance(torch.float32, BASELINE_T)
    found = compare_outputs([torch.full((4,), atol / 2)], [torch.zeros(4)])
    assert found.status is Status.OK and found.message == ""
    assert [t for t, ok in found.allclose.items() if not ok] == [
        t for t in TOLERANCE_LEVELS if t < -5
    ]


@pytest.mark.parametrize(("t", "status"), [(-5, Status.ACCURACY), (-1, Status.OK), (3, Status.OK)])
def test_the_decisive_level_can_be_chosen(t: int, status: Status) -> None:
    found = compare_outputs([torch.full((2,), 0.05)], [torch.zeros(2)], t=t)
    assert found.status is status


def test_structure_decides_before_values() -> None:
    assert compare_outputs([torch.zeros(2)], [torch.zeros(3)]).status is Status.SHAPE_MISMATCH
    assert compare_outputs([torch.zeros(2)], []).status is Status.SHAPE_MISMATCH
    found = compare_outputs([torch.zeros(2, dtype=torch.float64)], [torch.zeros(2)])
    assert found.status is Status.DTYPE_MISMATCH


def test_nan_is_never_a_wildcard_but_matching_nonfinite_values_are_equal() -> None:
    nan = torch.tensor([1.0, math.nan, math.inf])
    assert compare_outputs([nan.clone()], [nan]).status is Status.OK
    swapped = torch.tensor([1.0, math.inf, math.nan])
    assert compare_outputs([swapped], [nan]).status is Status.NONFINITE
    assert compare_outputs([torch.tensor([math.nan])], [torch.tensor([1.0])]).status is (
        Status.NONFINITE
    )


def test_nested_outputs_are_flattened_in_order() -> None:
    found = compare_outputs(
        ({"a": torch.ones(2)}, [torch.zeros(1)]), [torch.ones(2), torch.zeros(1)]
    )
    assert found.status is Status.OK and len(found.checks) == 2
