"""The forkserver that evaluation children fork from has already imported the heavy modules."""

from __future__ import annotations

import sys
from typing import Any

from passnet.evaluate._isolate import run_isolated


def _modules_at_start(send: Any) -> None:
    names = ("torch._dynamo", "torch._functorch.aot_autograd", "passnet.passes")
    send(("result", {name: name in sys.modules for name in names}))


def test_children_start_with_dynamo_and_passnet_imported() -> None:
    # Every child's first torch.compile would otherwise import them again (~2 s on the
    # development CPU; benchmarks/bench_startup.py).
    outcome = run_isolated(_modules_at_start, (), timeout_s=120)
    assert outcome.result == {
        "torch._dynamo": True,
        "torch._functorch.aot_autograd": True,
        "passnet.passes": True,
    }
