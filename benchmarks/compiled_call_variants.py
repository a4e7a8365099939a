"""Why two harnesses time one compiled graph differently: the ways a call can reach it.

For each sample, the same graph is compiled several ways, each once and side by side in
one process. Each differs in one thing from GraphNet's ``test_compiler``
(``torch.compile(model)`` with the weights and inputs as keyword arguments, grad mode on,
``torch.set_default_device`` set, and the Dynamo options its import sets) towards
passnet's harness (passnet's ``inductor``: positional arguments, module state marked,
timed under ``torch.no_grad()``). Then all are timed in R interleaved rounds. Each round
times every variant once: warm-up, then ``--trials`` calls, the host clock around each
synchronized call. Drift of the machine then moves every variant alike. Each cell is the
median of the R round medians, with their range::

    PYTHONPATH=src python3 benchmarks/compiled_call_variants.py SAMPLE... [--rounds 5] \
        [--profile N] [--graphnet GRAPHNET_CHECKOUT] [--json FILE]

``--profile N`` then profiles N calls of each variant: the CUDA kernels one call launches
(count and time) and the host events that take most of its time. ``--graphnet`` adds
GraphNet's own model and inputs, built by its ``test_compiler``'s functions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import torch

from passnet.compilers import (
    GRAPHNET_DYNAMO_OPTIONS,
    create_compiler,
    mark_module_state,
)
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


def _graphnet_side(checkout: str, sample_path: Path, device: str) -> tuple[Any, dict[str, Any]]:
    """GraphNet's model and inputs for ``sample_path``, built by its ``test_compiler``'s own
    functions (seed 123, as it sets), from the checkout ``checkout``."""
    import random
    import sys

    import numpy as np

    sys.path.insert(0, str(Path(checkout).resolve()))
    options = torch._dynamo.config.get_config_copy()
    from graph_net_bench.torch import test_compiler as gn

    # importing it sets Dynamo options for the process (GRAPHNET_DYNAMO_OPTIONS): undone,
    # so that only the variants named for them run under them
    torch._dynamo.config.load_config(options)

    random.seed(123)
    np.random.seed(123)
    torch.manual_seed(123)
    args = argparse.Namespace(model_path=str(sample_path), device=device, compiler="inductor")
    return gn.get_model(args), gn.get_input_dict(args)


class Variant(NamedTuple):
    call: Callable[[], Any]
    no_grad: bool
    default_device: bool = False


def _context(variant: Variant, device: str) -> contextlib.ExitStack:
    """The modes a variant is compiled and called under."""
    stack = contextlib.ExitStack()
    if variant.no_grad:
        stack.enter_context(torch.no_grad())
    if variant.default_device:
        stack.enter_context(_default_device(device))
    return stack


def _interleaved(
    sample_path: Path,
    device: str,
    warmup: int,
    trials: int,
    rounds: int,
    graphnet: str | None = None,
    profile: int = 0,
) -> dict[str, dict[str, Any] | str]:
    """The variants compiled once each, then timed in ``rounds`` interleaved rounds."""
    # one Dynamo cache entry per variant and frame, all kept (the default limit is 8)
    torch._dynamo.config.cache_size_limit = 64
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 64
    torch._dynamo.reset()
    sample = load_sample(sample_path)
    module = sample.build_module(device)
    inputs = sample.replay_inputs(device, 0)
    kwargs = dict(zip(sample.param_names, inputs))
    example = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    mark_module_state(example, sample.module_state_positions)
    compiled = torch.compile(module, backend="inductor")
    static = torch.compile(module, backend="inductor", dynamic=False)
    ours = create_compiler("inductor").compile(module, example)
    unmarked = create_compiler("inductor").compile(module, inputs)
    # the Dynamo options GraphNet's harness runs under (set by importing its extractor),
    # traced now (first calls) under those options, with and without the default device
    with torch._dynamo.config.patch(GRAPHNET_DYNAMO_OPTIONS):
        captured = torch.compile(module, backend="inductor")
        captured(**kwargs)
        with torch.no_grad():
            captured(**kwargs)
        published = torch.compile(module, backend="inductor")
        with _default_device(device):
            published(**kwargs)
    ours_captured = create_compiler(
        "inductor", **{f"dynamo.{k}": v for k, v in GRAPHNET_DYNAMO_OPTIONS.items()}
    ).compile(module, example)
    calls: dict[str, Variant] = {
        "eager, no_grad": Variant(lambda: module(*inputs), True),
        "eager, grad": Variant(lambda: module(*inputs), False),
        "eager, grad, default device": Variant(lambda: module(**kwargs), False, True),
        "compile(model), kwargs, grad": Variant(lambda: compiled(**kwargs), False),
        "compile(model), kwargs, no_grad": Variant(lambda: compiled(**kwargs), True),
        "compile(model), positional, no_grad": Variant(lambda: compiled(*inputs), True),
        "compile(model, dynamic=False), kwargs, no_grad": Variant(lambda: static(**kwargs), True),
        "compile(model, dynamic=False), positional, no_grad": Variant(
            lambda: static(*inputs), True
        ),
        "passnet compiler (warm, marked), no_grad": Variant(lambda: ours(*inputs), True),
        "passnet compiler (warm, unmarked), no_grad": Variant(lambda: unmarked(*inputs), True),
        "graphnet as published: its dynamo options, kwargs, grad, default device": Variant(
            lambda: published(**kwargs), False, True
        ),
        "graphnet: compile(model) under its dynamo options, kwargs, grad": Variant(
            lambda: captured(**kwargs), False
        ),
        "graphnet's dynamo options: compile(model), kwargs, no_grad": Variant(
            lambda: captured(**kwargs), True
        ),
        "passnet compiler, graphnet's dynamo options, no_grad": Variant(
            lambda: ours_captured(*inputs), True
        ),
    }
    if graphnet is not None:
        # GraphNet's own model and inputs (its replay of the metadata), and passnet's model
        # on GraphNet's inputs: what differs between the two harnesses' processes
        gn_model, gn_inputs = _graphnet_side(graphnet, sample_path, device)
        gn_compiled = torch.compile(gn_model, backend="inductor")
        with torch._dynamo.config.patch(GRAPHNET_DYNAMO_OPTIONS):  # as in GraphNet's process
            gn_compiled(**gn_inputs)
        calls["graphnet model and inputs: eager, grad"] = Variant(
            lambda: gn_model(**gn_inputs), False
        )
        calls["graphnet model and inputs: compile(model), kwargs, grad"] = Variant(
            lambda: gn_compiled(**gn_inputs), False
        )
        calls["passnet model, graphnet inputs: compile(model), kwargs, grad"] = Variant(
            lambda: compiled(**gn_inputs), False
        )
    medians: dict[str, list[float]] = {name: [] for name in calls}
    failed: dict[str, str] = {}
    for name, variant in calls.items():  # compiles what is left, outside every round
        try:
            with _context(variant, device):
                variant.call()
        except Exception as exc:  # noqa: BLE001 - a variant that fails is a finding
            failed[name] = f"{type(exc).__name__}: {exc}"[:80]
    for _ in range(rounds):
        for name, variant in calls.items():
            if name not in failed:
                with _context(variant, device):
                    medians[name].append(_median_ms(variant.call, warmup, trials))
    out: dict[str, dict[str, Any] | str] = dict(failed)
    for name, values in medians.items():
        if values:
            out[name] = {
                "median_ms": statistics.median(values),
                "min_ms": min(values),
                "max_ms": max(values),
            }
            if profile:
                with _context(calls[name], device):
                    out[name]["profile"] = _profile(calls[name].call, profile)
    return out


def _profile(call: Callable[[], Any], calls: int) -> dict[str, Any]:
    """What one call does, from ``calls`` profiled calls: its CUDA kernels (count and
    time) and the host-side events that take the most of its time (self time and count),
    per call. Two variants that launch the same kernels but differ in time differ on the
    host: in guards, the Dynamo cache lookups, the wrappers around the compiled graphs."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(calls):
            call()
        _sync()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    host = sorted(
        (e for e in prof.key_averages() if e.self_cpu_time_total > 0),
        key=lambda e: e.self_cpu_time_total,
        reverse=True,
    )
    return {
        "kernels_per_call": len(kernels) / calls,
        "kernel_us_per_call": sum(e.device_time_total for e in kernels) / calls,
        "host_top": [
            {"name": e.key[:60], "self_us": e.self_cpu_time_total / calls, "count": e.count / calls}
            for e in host[:8]
        ],
    }


def _print(results: dict[str, dict[str, dict[str, Any] | str]]) -> None:
    names = list(next(iter(results.values())))
    width = max(len(n) for n in names)
    for sample, res in results.items():
        for name in names:
            v = res.get(name)
            if isinstance(v, dict) and "profile" in v:
                prof = v["profile"]
                top = "; ".join(
                    f"{h['name']} {h['self_us']:.0f}us x{h['count']:g}" for h in prof["host_top"]
                )
                print(
                    f"{Path(sample).name[:22]} | {name} | kernels {prof['kernels_per_call']:g} "
                    f"({prof['kernel_us_per_call']:.0f} us) | host: {top}"
                )
    print(f"{'variant (median of round medians, ms [range])':<{width}} "
          + " ".join(f"{Path(s).name[:22]:>22}" for s in results))  # fmt: skip
    for name in names:
        cells = []
        for res in results.values():
            v = res.get(name)
            if isinstance(v, dict):
                cells.append(
                    f"{v['median_ms']:7.3f} [{v['min_ms']:.3f}-{v['max_ms']:.3f}]".rjust(22)
                )
            else:
                cells.append(f"{str(v)[:22]:>22}")
        print(f"{name:<{width}} " + " ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (see above)")
    parser.add_argument(
        "--graphnet",
        default=None,
        help="a GraphNet checkout; adds its own model and inputs as variants",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="profile N calls of each variant (kernels, host time per call)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    results = {
        str(s): _interleaved(
            s, args.device, args.warmup, args.trials, args.rounds, args.graphnet, args.profile
        )
        for s in args.samples
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    _print(results)


if __name__ == "__main__":
    main()
