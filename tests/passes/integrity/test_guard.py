"""The runtime dispatch guard: creation/metadata pass, computation is rejected, evasion fails."""

from __future__ import annotations

import pytest
import torch

from passnet.errors import PassRejected
from passnet.passes.integrity import DispatchGuard

X = torch.randn(4, 6)


def _allowed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    t = x.t().contiguous()  # a layout copy for a kernel
    v = t.view(-1).reshape(6, 4).unsqueeze(0).squeeze(0)[1:3].permute(1, 0)
    z = torch.zeros((2,), dtype=x.dtype, device=x.device)
    z.fill_(1.0)
    s = torch.full((1,), 2.0).item() + float(torch.ones(1))
    w = x.new_empty((3,)).zero_()
    _ = (
        x.shape,
        x.stride(),
        x.numel(),
        x.dtype,
        x.device,
        x.is_contiguous(),
        x.data_ptr(),
        v,
        w,
        s,
    )
    return out


def test_inactive_guard_does_not_interfere() -> None:
    guard = DispatchGuard()
    assert torch.equal(guard.call("P", lambda x: x + 1, (X,)), X + 1)


def test_creation_views_layout_copies_and_scalar_reads_are_allowed() -> None:
    guard = DispatchGuard()
    with guard.checking():
        out = guard.call("P", _allowed, (X,))
    assert out.shape == X.shape
    assert guard.violations == []


def _add(x: torch.Tensor) -> torch.Tensor:
    return x + 1  # line of the violation


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (_add, "aten.add.Tensor"),
        (lambda x: x.to(torch.float16), "aten._to_copy"),
        (lambda x: torch.empty_like(x).copy_(x), "aten.copy_"),
        (lambda x: x.clone(), "aten.clone"),
        (lambda x: x.abs(), "aten.abs"),
        (lambda x: max(x.sum(), x.sum()), "aten.sum"),
        (lambda x: torch.empty_like(x).fill_(x[0, 0]), "aten.fill_.Tensor"),
        (lambda x: x[x > 0], "aten.gt"),
    ],
)
def test_computation_is_rejected_naming_op_file_and_line(fn, op: str) -> None:
    guard = DispatchGuard()
    with pytest.raises(PassRejected) as info:
        with guard.checking():
            guard.call("Cheat", fn, (X,))
    ctx = info.value.context
    assert ctx["op"].startswith(op)
    assert ctx["pass_name"] == "Cheat"
    assert ctx["file"] == "test_guard.py"
    assert ctx["rule"] == "dispatch"
    if fn is _add:
        assert ctx["line"] == str(_add.__code__.co_firstlineno + 1)


def _swallow(x: torch.Tensor) -> torch.Tensor:
    try:
        return x * 2
    except PassRejected:
        return torch.empty_like(x)  # the slow honest path, only taken when watched


def test_a_rejection_caught_by_the_pass_still_rejects_the_call() -> None:
    guard = DispatchGuard()
    with pytest.raises(PassRejected, match="aten.mul"):
        with guard.checking():
            guard.call("Sneaky", _swallow, (X,))


def test_checking_block_raises_even_if_the_caller_swallowed_the_rejection() -> None:
    guard = DispatchGuard()
    with pytest.raises(PassRejected, match="aten.mul"):
        with guard.checking():
            try:
                guard.call("Sneaky", lambda x: x * 2, (X,))
            except PassRejected:
                pass
    assert len(guard.violations) == 1


class _Lazy(torch.Tensor):
    pass


def test_tensor_subclass_outputs_are_rejected() -> None:
    guard = DispatchGuard()
    with pytest.raises(PassRejected, match="tensor subclass"):
        with guard.checking():
            guard.call("Lazy", lambda x: torch.empty_like(x).as_subclass(_Lazy), (X,))


def test_unchecked_calls_are_not_guarded() -> None:
    # Timing calls run outside checked_call: no interception, no overhead beyond one Python call.
    guard = DispatchGuard()
    with guard.checking():
        pass
    assert torch.equal(guard.call("P", _add, (X,)), X + 1)
