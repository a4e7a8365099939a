"""A deliberately wrong Paddle compiler: the static graph, its outputs perturbed."""

from __future__ import annotations

from typing import Any

from passnet.compilers import Compiler


class Perturbed(Compiler):
    config_keys = frozenset()
    frameworks = frozenset({"paddle"})

    def compile(self, module: Any, example_inputs: list[Any]) -> Any:
        def call(*args: Any) -> Any:
            out = module(*args)
            outs = out if isinstance(out, (list, tuple)) else [out]
            return [o * 1.01 + 0.01 if o.is_floating_point() else o for o in outs]

        return call
