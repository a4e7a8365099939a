"""Once-per-process start-up work of a decomposition, done ahead of the first sample.

The first Inductor compilation of a process spends seconds on start-up that no later one
repeats (lowerings, pattern tables, lazy imports), and so does the first fake-tensor run
of the symbolic-dims analysis (the shape environment's sympy machinery). A batch that
decomposes every sample in a child forked from one forkserver pays that once in the
forkserver instead of once per sample: :func:`warm_up` compiles a small graph through
the same path as the fusible analysis and makes one fake run. Importing this module calls
it, which is how the forkserver runs it (a decomposition names this module in its
``preload`` to :func:`passnet.isolate.run_isolated`); nothing of what it computes is kept.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.fx

__all__ = ["warm_up"]

log = logging.getLogger(__name__)


class _Small(torch.nn.Module):
    """Convolution, normalization, matrix products, a softmax, views: the usual kinds of
    kernel, so that the lazily built tables they need are built here."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.norm = torch.nn.LayerNorm(8)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(self.bn(self.conv(x)))
        t = self.norm(y.flatten(2).transpose(1, 2))
        q = self.linear(t)
        a = torch.softmax(q @ t.transpose(1, 2) / 8**0.5, dim=-1) @ t
        return (a + q, y.mean(dim=(2, 3)))


def warm_up() -> float:
    """Compile a small graph as the fusible analysis does and make one fake run; the
    seconds it took. Failures are logged, never raised (warming is an optimization)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from passnet.dataset._fusible import list_kernels

    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            module = _Small().eval()
            gm = torch.fx.symbolic_trace(module)
            list_kernels(gm, [torch.randn(2, 3, 4, 4)])
            with FakeTensorMode(shape_env=ShapeEnv()):
                gm(torch.empty(2, 3, 4, 4))
    except Exception as exc:  # noqa: BLE001 - the samples' own runs report real failures
        log.debug("warm-up failed: %s: %s", type(exc).__name__, exc)
    return time.perf_counter() - t0


warm_up()
