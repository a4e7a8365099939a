"""Compilers that misbehave on purpose, loaded by file path into the evaluation child."""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

import torch

from passnet.compilers import Compiler


def _wrap(module: torch.nn.Module, post: Any) -> Any:
    def run(*args: Any) -> Any:
        return post(module(*args))

    return run


class Segfault(Compiler):
    def compile(self, module, example_inputs):
        def run(*args):
            ctypes.string_at(0)  # reads address 0: SIGSEGV

        return run


class SegfaultWhileCompiling(Compiler):
    def compile(self, module, example_inputs):
        ctypes.string_at(0)


class Hang(Compiler):
    def compile(self, module, example_inputs):
        def run(*args):
            while True:
                time.sleep(0.05)

        return run


class RaisesAtCompile(Compiler):
    def compile(self, module, example_inputs):
        raise RuntimeError("backend exploded")


class RaisesAtRun(Compiler):
    def compile(self, module, example_inputs):
        def run(*args):
            raise RuntimeError("kernel launch failed")

        return run


class WrongDtype(Compiler):
    def compile(self, module, example_inputs):
        return _wrap(
            module, lambda outs: tuple(o.double() if o.is_floating_point() else o for o in outs)
        )


class WrongShape(Compiler):
    def compile(self, module, example_inputs):
        return _wrap(
            module, lambda outs: tuple(o.flatten()[:-1] if o.numel() > 1 else o for o in outs)
        )


class ExtraOutput(Compiler):
    def compile(self, module, example_inputs):
        return _wrap(module, lambda outs: (*outs, outs[0]))


class NaNOutput(Compiler):
    def compile(self, module, example_inputs):
        def post(outs):
            o = outs[0].clone()
            o.view(-1)[0] = float("nan")
            return (o, *outs[1:])

        return _wrap(module, post)


class SlightlyOff(Compiler):
    """Adds 1e-3 relative error: accuracy failure at the baseline, fine at loose tolerances."""

    def compile(self, module, example_inputs):
        return _wrap(module, lambda outs: tuple(o * (1 + 1e-3) for o in outs))


class StaleFirstDraw(Compiler):
    """Caches the first output and returns it forever: must fail on the fresh draw."""

    def compile(self, module, example_inputs):
        cache = {}

        def run(*args):
            if "out" not in cache:
                cache["out"] = module(*args)
            return cache["out"]

        return run


class MutatesInput(Compiler):
    def compile(self, module, example_inputs):
        def run(*args):
            out = module(*args)
            for a in args:
                if isinstance(a, torch.Tensor) and a.is_floating_point():
                    a.add_(1.0)
                    break
            return out

        return run


class Slow(Compiler):
    """Correct but sleeps 2 ms per call: speedup must come out well below 1."""

    def compile(self, module, example_inputs):
        def run(*args):
            time.sleep(0.002)
            return module(*args)

        return run


class Sleeps(Compiler):
    """Sleeps long enough before finishing to be killed from outside during a run."""

    def compile(self, module, example_inputs):
        time.sleep(3)
        return module


class RecordsGc(Compiler):
    """Correct; appends whether Python's garbage collector was on at each call to ``config['log']``."""

    def compile(self, module, example_inputs):
        import gc

        log = self.config["log"]

        def run(*args):
            with open(log, "a") as f:
                f.write("1" if gc.isenabled() else "0")
            return module(*args)

        return run


class MarksZeroInput(Compiler):
    """Writes -0.0 over an input's 0.0 to mark it as seen, then skips the work on marked inputs.

    Checked calls get fresh clones, so they compute; only a bitwise mutation check
    (0.0 and -0.0 compare equal) stops the timed calls from doing nothing.
    """

    def compile(self, module, example_inputs):
        def run(*args):
            bias = args[1]
            if torch.signbit(bias[0]).item():  # marked: a previous call saw these inputs
                return (torch.empty_like(args[0]),)
            out = module(*args)
            bias[0] = -0.0
            return out

        return run


class Jittery(Compiler):
    """Correct, but every other call sleeps 5 ms and the others 1 ms: a timing spread
    (IQR/median about 1.3) that no re-measurement removes."""

    def compile(self, module, example_inputs):
        calls = [0]

        def run(*args):
            calls[0] += 1
            time.sleep(0.005 if calls[0] % 2 else 0.001)
            return module(*args)

        return run


class SyncsWhileCapturing(Compiler):
    """Correct; reads a value back to the host on every call, which a CUDA graph cannot
    capture (replay timing must say so and keep the result)."""

    def compile(self, module, example_inputs):
        def run(*args):
            out = module(*args)
            first = out[0] if isinstance(out, (tuple, list)) else out
            float(first.sum())  # a device-to-host copy: not allowed while capturing
            return out

        return run


class DiesWhileCapturing(Compiler):
    """Correct, but kills its own process when called during CUDA-graph capture."""

    def compile(self, module, example_inputs):
        import os
        import signal

        def run(*args):
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                os.kill(os.getpid(), signal.SIGKILL)
            return module(*args)

        return run


class HostMemoryHog(Compiler):
    """Allocates (and touches) more host memory than the machine has available."""

    def compile(self, module, example_inputs):
        from passnet.evaluate import available_bytes

        too_much = int(1.5 * (available_bytes("cpu") or 2**40))
        torch.ones(too_much // 4, dtype=torch.float32)
        return module


class SegfaultOnSecondCompile(Compiler):
    """Compiles like eager, but the second compile of its process reads address 0 (the
    count lives in the process's environment: this file is loaded afresh per compiler)."""

    def compile(self, module, example_inputs):
        count = int(os.environ.get("PASSNET_TEST_COMPILES", "0")) + 1
        os.environ["PASSNET_TEST_COMPILES"] = str(count)
        if count == 2:
            ctypes.string_at(0)
        return module


class SpoilsTheProcess(Compiler):
    """Compiles like eager, and leaves its process unable to clear up for another graph."""

    def compile(self, module, example_inputs):
        def refuse() -> None:
            raise RuntimeError("spoiled")

        torch._dynamo.reset = refuse
        return module
