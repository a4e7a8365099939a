"""Why two harnesses time one compiled graph differently: the ways a call can reach it.

For each sample, the same Inductor program is reached several ways and timed the same way
(CUDA, warm-up then ``--trials`` calls, host clock around each synchronized call; the
median in ms). The variants differ in one thing each from GraphNet's ``test_compiler``
(``torch.compile(model)`` with the weights and inputs as keyword arguments, grad mode on,
``torch.set_default_device`` set) towards passnet's harness (``compile_warm`` with
``dynamic=False``, positional arguments, module state marked, timed under
``torch.no_grad()``):

    PYTHONPATH=src python3 benchmarks/compiled_call_variants.py SAMPLE... [--trials 100]

Prints one table (variant × sample) and, with ``--json FILE``, writes the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from passnet.compilers import create_compiler, mark_module_state
from passnet.sample import load_sample


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _median_ms(call: Callable[[], Any], warmup: int, trials: int) -> float:
    for _ in range(warmup):
        call()
    _sync()
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        call()
        _sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


@contextlib.contextmanager
def _default_device(device: str | None) -> Iterator[None]:
    if device is None:
        yield
        return
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_device(None)


def _variants(sample_path: Path, device: str, warmup: int, trials: int) -> dict[str, float | str]:
    sample = load_sample(sample_path)
    module = sample.build_module(device)
    inputs = sample.replay_inputs(device, 0)
    names = sample.param_names
    kwargs = dict(zip(names, inputs))
    out: dict[str, float | str] = {}

    def timed(name: str, make: Callable[[], Callable[[], Any]], *, no_grad: bool) -> None:
        torch._dynamo.reset()
        try:
            call = make()
            ctx = torch.no_grad() if no_grad else contextlib.nullcontext()
            with ctx:
                call()  # compiles (first call) outside the timing
                out[name] = _median_ms(call, warmup, trials)
        except Exception as exc:  # noqa: BLE001 - a variant that fails is a finding
            out[name] = f"{type(exc).__name__}: {exc}"[:80]

    with torch.no_grad():
        out["eager (no_grad)"] = _median_ms(lambda: module(*inputs), warmup, trials)
    out["eager (grad)"] = _median_ms(lambda: module(*inputs), warmup, trials)
    with _default_device(device):
        out["eager (grad, default device)"] = _median_ms(lambda: module(**kwargs), warmup, trials)

    def graphnet(dynamic: bool | None) -> Callable[[], Callable[[], Any]]:
        def make() -> Callable[[], Any]:
            compiled = torch.compile(module, backend="inductor", dynamic=dynamic)
            return lambda: compiled(**kwargs)

        return make

    with _default_device(device):
        timed(
            "graphnet: compile(model), kwargs, grad, default device", graphnet(None), no_grad=False
        )
    timed("compile(model), kwargs, grad", graphnet(None), no_grad=False)
    timed("compile(model), kwargs, no_grad", graphnet(None), no_grad=True)
    timed("compile(model, dynamic=False), kwargs, no_grad", graphnet(False), no_grad=True)

    def positional() -> Callable[[], Any]:
        compiled = torch.compile(module, backend="inductor", dynamic=False)
        return lambda: compiled(*inputs)

    timed("compile(model, dynamic=False), positional, no_grad", positional, no_grad=True)

    def compiled_in_grad() -> Callable[[], Any]:
        # compiled (and called once) in grad mode, then timed under no_grad: a recompile
        compiled = torch.compile(module, backend="inductor", dynamic=False)
        compiled(*inputs)
        return lambda: compiled(*inputs)

    timed("compiled in grad mode, timed under no_grad", compiled_in_grad, no_grad=True)

    def passnet(marked: bool, warm: bool) -> Callable[[], Callable[[], Any]]:
        def make() -> Callable[[], Any]:
            example = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            if marked:
                mark_module_state(example, sample.module_state_positions)
            compiler = create_compiler("inductor", warm=warm)
            compiled = compiler.compile(module, example)
            return lambda: compiled(*inputs)

        return make

    timed("passnet compiler (warm, marked), no_grad", passnet(True, True), no_grad=True)
    timed("passnet compiler (warm, marked), grad", passnet(True, True), no_grad=False)
    timed("passnet compiler (cold, unmarked), no_grad", passnet(False, False), no_grad=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {str(s): _variants(s, args.device, args.warmup, args.trials) for s in args.samples}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    names = list(next(iter(results.values())))
    width = max(len(n) for n in names)
    print(f"{'variant':<{width}} " + " ".join(f"{Path(s).name[:14]:>14}" for s in results))
    for name in names:
        cells = []
        for res in results.values():
            v = res.get(name)
            cells.append(f"{v:14.3f}" if isinstance(v, float) else f"{str(v)[:14]:>14}")
        print(f"{name:<{width}} " + " ".join(cells))


if __name__ == "__main__":
    main()
