"""Built-in compilers: eager, TorchInductor (default and max-autotune), CUDA graphs."""

from __future__ import annotations

import difflib
import functools
import logging
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from passnet.compilers._base import Compiler, check_config_type, register_compiler
from passnet.compilers._cudagraph import (
    PartitionChoices,
    PerShape,
    has_symbolic_sizes,
    is_module_state,
    select_cudagraph,
    split_reason,
)
from passnet.errors import CompilerConfigError
from passnet.record import CudaGraphDecision

__all__ = [
    "CudaGraphs",
    "Eager",
    "Inductor",
    "InductorMaxAutotune",
    "InductorSelectiveCudaGraphs",
    "compile_warm",
    "inductor_option_types",
    "stop_compile_workers",
]

log = logging.getLogger(__name__)


@register_compiler("eager")
class Eager(Compiler):
    """The module itself: the A/A baseline (Paddle eager on a Paddle sample). It takes no
    config."""

    config_keys = frozenset()
    frameworks = frozenset({"torch", "paddle"})

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        return module


DEFAULT_DYNAMIC: bool | None = None
"""``dynamic`` of the Inductor compilers unless configured: torch.compile's default (static
sizes first, symbolic ones for a size that changes). Under Dynamo's default options it
compiles the same programs as ``False``; with ``dynamo.capture_dynamic_output_shape_ops``
it captures operators whose output size depends on the data (boolean-mask indexing) where
``False`` still breaks the graph: GraphNet's GCN sample is then one Dynamo graph, not 11."""

DYNAMO_PREFIX = "dynamo."
"""Config keys ``dynamo.KEY`` are options of ``torch._dynamo.config``, set while compiling."""

GRAPHNET_DYNAMO_OPTIONS: Mapping[str, Any] = {
    "capture_dynamic_output_shape_ops": True,
    "capture_scalar_outputs": True,
}
"""The Dynamo options of GraphNet's harness that change what is captured: importing its
``graph_net.torch`` turns them on for the whole process (with ``capture_sparse_compute``,
``allow_rnn`` and ``raise_on_ctx_manager_usage=False``). As passnet config keys, each
prefixed with :data:`DYNAMO_PREFIX`, they compile a graph as GraphNet's harness does."""


@register_compiler("inductor")
class Inductor(Compiler):
    """``torch.compile`` with its defaults (TorchInductor).

    Config: ``dynamic`` (default None, torch.compile's own: static sizes first, symbolic
    ones only for a size that changes; see :data:`DEFAULT_DYNAMIC`), ``warm`` (default
    True) and ``compile_threads`` (default 1, except for max-autotune; ``None``: Inductor's
    own choice, one per core), see :func:`compile_warm`; ``dynamo.KEY`` is an option of
    ``torch._dynamo.config`` in force while compiling (``dynamo.capture_scalar_outputs``);
    any other key is an Inductor option (a key of
    ``torch._inductor.config``, nested ones dotted: ``triton.cudagraphs``), checked against
    Inductor's options and their types before anything runs (:meth:`check_config`).
    """

    mode: str | None = None
    default_compile_threads: int | None = 1
    config_types: Mapping[str, tuple[str, ...]] = {
        "dynamic": ("boolean", "null"),
        "warm": ("boolean",),
        "compile_threads": ("integer", "null"),
    }
    """passnet's own keys; ``dynamo.KEY`` is a Dynamo option, every other key an Inductor
    option."""

    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        """passnet's keys by their declared types (``compile_threads`` positive), every other
        key as an Inductor option: one of ``torch._inductor.config`` with a value of its
        type (:func:`inductor_option_types`), or, named ``dynamo.KEY``, of
        ``torch._dynamo.config`` (:func:`dynamo_option_types`). Unknown options and
        ill-typed values fail here, before anything runs, not as a compile error of every
        graph."""
        super().check_config(config)
        threads = config.get("compile_threads")
        if isinstance(threads, int) and threads < 1:
            raise CompilerConfigError(
                f"compiler {cls.name!r}: config compile_threads must be a positive integer "
                f"or null, got {threads}",
                compiler=cls.name,
                field="compile_threads",
            )
        known = {**inductor_option_types(), **dynamo_option_types()}
        for key, value in config.items():
            if key in cls.config_types:
                continue
            if key not in known:
                close = difflib.get_close_matches(key, [*known, *cls.config_types], n=3)
                maybe = f"; did you mean {' or '.join(close)}?" if close else ""
                raise CompilerConfigError(
                    f"compiler {cls.name!r} does not take config key {key}: it is neither "
                    f"one of passnet's ({', '.join(cls.config_types)}), an Inductor option "
                    f"(torch._inductor.config) nor a Dynamo option ({DYNAMO_PREFIX}KEY, "
                    f"torch._dynamo.config){maybe}",
                    compiler=cls.name,
                    field=key,
                )
            if known[key] is not None:
                check_config_type(cls.name, key, value, known[key])

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        options, dynamo = self._options()
        kwargs: dict[str, Any] = {
            "backend": "inductor",
            "dynamic": self.config.get("dynamic", DEFAULT_DYNAMIC),
        }
        if self.mode and options:
            # torch.compile takes a mode or options, not both: the mode's options, then
            # the user's, are what mode= would apply and then options= on top
            from torch._inductor import list_mode_options

            kwargs["options"] = {**list_mode_options(self.mode, kwargs["dynamic"]), **options}
        elif self.mode:
            kwargs["mode"] = self.mode
        elif options:
            kwargs["options"] = options
        return compile_warm(
            module,
            example_inputs,
            # prepared: the first compile here already loads the program from the caches
            warm=self.config.get("warm", True) and not self.cache_prepared,
            compile_threads=self.config.get("compile_threads", self.default_compile_threads),
            dynamo_options=dynamo,
            settings=self.compiled_with,
            **kwargs,
        )

    def _options(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The configured Inductor options and Dynamo options (without their prefix)."""
        options, dynamo = {}, {}
        for key, value in self.config.items():
            if key.startswith(DYNAMO_PREFIX):
                dynamo[key.removeprefix(DYNAMO_PREFIX)] = value
            elif key not in self.config_types:
                options[key] = value
        return options, dynamo


def _compile_settings(
    kwargs: Mapping[str, Any],
    warm: bool,
    compile_threads: int | None,
    dynamo_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What :func:`compile_warm` compiles with, as plain JSON for a record: torch.compile's
    keyword arguments (a backend that is a function by its name), the warm second compile,
    Inductor's compile threads, and the Dynamo options that change what is captured (the
    keys of :data:`GRAPHNET_DYNAMO_OPTIONS`, and any given) with the values in force while
    compiling: a process whose imports turned them on says so."""
    in_force = {key: getattr(torch._dynamo.config, key) for key in GRAPHNET_DYNAMO_OPTIONS}
    in_force.update(dynamo_options or {})
    return {
        "torch_compile": {
            key: getattr(value, "__qualname__", repr(value)) if callable(value) else value
            for key, value in sorted(kwargs.items())
        },
        "warm": warm,
        "compile_threads": compile_threads,
        "dynamo": dict(sorted(in_force.items())),
    }


def compile_warm(
    module: torch.nn.Module,
    example_inputs: list[Any],
    *,
    warm: bool = True,
    compile_threads: int | None = 1,
    dynamo_options: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Callable[..., Any]:
    """``torch.compile(module, **kwargs)``, compiled now; with ``warm``, compiled a second time.

    torch.compile is lazy: the first call compiles, so that compiler failures
    surface here (compile_error) and not in the first checked call. Each compile
    starts from a fresh Dynamo state: evaluations never share compiled code.

    With ``warm`` the module is compiled again after a Dynamo reset, and the second
    program is the one returned. It is loaded from Inductor's caches (FX graph,
    autotuning results, Triton binaries), which the first compile filled when they
    were cold: the program timed is then the same whether this machine's caches
    were cold or warm. Without it, a cold and a warm run of the same command can
    time different programs (measured on an H200: a Swin graph's compiled median
    was 1.56 ms after a cold compile and 1.14 ms after a cache hit).

    ``compile_threads`` is Inductor's number of compile workers while compiling here.
    The default, 1, compiles in this process: with more, Inductor starts a pool of
    worker processes in every evaluation (a sidecar that imports torch, then a worker
    per thread), also when its caches hold every kernel already, and stops it at the
    end. On an H100 machine with 16 cores that cost about 9 s per evaluation with warm
    caches (``benchmarks/bench_startup.py``). A pool pays only for cold compiles of
    graphs with many kernels; ``None`` leaves the number to Inductor (one per core).

    ``dynamo_options`` are options of ``torch._dynamo.config`` in force while compiling
    (Dynamo traces on the first call, which is made here); a later recompile, if a guard
    fails, traces under the process's own options.

    ``settings``, where given, is filled before compiling with what this compiles with,
    as plain JSON for a record (:func:`_compile_settings`): a compiler's
    ``compiled_with``, kept also when the compile then fails.
    """
    if compile_threads is not None and (
        isinstance(compile_threads, bool)
        or not isinstance(compile_threads, int)
        or compile_threads < 1
    ):
        raise ValueError(
            f"compiler config compile_threads must be a positive integer or None, "
            f"got {compile_threads!r}"
        )
    if settings is not None:
        settings.clear()
        settings.update(_compile_settings(kwargs, warm, compile_threads, dynamo_options))
    import torch._inductor.config as inductor_config

    patch = {} if compile_threads is None else {"compile_threads": compile_threads}
    passes = 2 if warm else 1
    compiled: Callable[..., Any] = module
    for attempt in range(passes):
        torch._dynamo.reset()
        hits_before = _fx_cache_hits()
        compiled = torch.compile(module, **kwargs)
        dynamo = torch._dynamo.config.patch(dynamo_options or {})
        with torch.no_grad(), inductor_config.patch(patch), dynamo:
            compiled(*example_inputs)
        if attempt == 1 and _fx_cache_hits() == hits_before:
            log.warning(
                "warm compile: Inductor's FX graph cache did not hit on the second compile "
                "(caches disabled?); the timed program is a second cold compile"
            )
    stop_compile_workers()
    return compiled


@functools.cache
def inductor_option_types() -> dict[str, tuple[str, ...] | None]:
    """Every option of ``torch._inductor.config`` (nested ones dotted, ``triton.cudagraphs``)
    and the JSON types its value may have: from the option's declared type where it maps
    onto JSON types (``int | None``: an integer or null), else from its default's type;
    None where neither tells (a default of None with a Python-object type)."""
    import torch._inductor.config as inductor_config

    return _option_types(inductor_config)


@functools.cache
def dynamo_option_types() -> dict[str, tuple[str, ...] | None]:
    """Every option of ``torch._dynamo.config`` as a config key (``dynamo.KEY``) and the
    JSON types its value may have, as :func:`inductor_option_types` gives Inductor's."""
    import torch._dynamo.config as dynamo_config

    return {DYNAMO_PREFIX + k: v for k, v in _option_types(dynamo_config).items()}


def _option_types(config_module: Any) -> dict[str, tuple[str, ...] | None]:
    entries = getattr(config_module, "_config", {})  # declared types, where torch keeps them
    out: dict[str, tuple[str, ...] | None] = {}
    for key, default in config_module.get_config_copy().items():
        declared = getattr(entries.get(key), "value_type", None)
        kinds = _json_types_of_type(declared)
        if kinds == ("null",):  # an option declared by a bare None default: type unknown
            kinds = None
        out[key] = kinds or _json_types_of_type(type(default) if default is not None else None)
    return out


_JSON_OF_TYPE: dict[Any, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
    list: "array",
    tuple: "array",
    set: "array",
    dict: "object",
}


def _json_types_of_type(tp: Any) -> tuple[str, ...] | None:
    """The JSON types a Python type annotation admits; None where one of its members is not
    a JSON type (a callable, a class, a forward reference)."""
    if tp is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_json_types_of_type(a) for a in typing.get_args(tp)]
        if any(p is None for p in parts):
            return None
        return tuple(dict.fromkeys(t for p in parts for t in p or ()))
    if origin is typing.Literal:
        return tuple(dict.fromkeys(_JSON_OF_TYPE.get(type(v), "other") for v in tp.__args__))
    base = origin or tp
    if isinstance(base, type):
        if base in _JSON_OF_TYPE:
            return (_JSON_OF_TYPE[base],)
        if issubclass(base, Mapping):
            return ("object",)
        if issubclass(base, Sequence) and not issubclass(base, (str, bytes)):
            return ("array",)
    return None


def _fx_cache_hits() -> int:
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"])


def stop_compile_workers() -> None:
    """Stop Inductor's pool of compile worker processes once compilation is done.

    The pool outlives compilation; its processes start and idle on the same CPUs
    that launch kernels, which slows launch-bound graphs during timing.
    """
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:  # older torch: nothing to stop
        return
    shutdown_compile_workers()


@register_compiler("inductor-max-autotune")
class InductorMaxAutotune(Inductor):
    """``torch.compile(mode="max-autotune")``.

    Autotuning compiles many candidate kernels, in parallel over Inductor's compile
    workers, so this compiler leaves their number to Inductor.
    """

    mode = "max-autotune"
    default_compile_threads = None


@register_compiler("inductor-scg")
class InductorSelectiveCudaGraphs(Inductor):
    """Inductor, and for every Dynamo graph a CUDA graph where replaying it measured faster
    than launching its kernels (selective CUDA graphs; :func:`select_cudagraph`); CUDA only.
    A graph that cannot be captured whole (CPU tensors beside its CUDA ones, data-dependent
    values: :func:`split_reason`) is split by Inductor into partitions, and the choice is
    made for each (:class:`PartitionChoices`). A graph compiled with symbolic sizes
    (``dynamic``) is chosen for per call signature (:class:`PerShape`).

    Each graph is compiled once (no warm second compile: the selection measures the very
    program that is timed), launched and replayed on its own inputs, and the faster kept;
    :meth:`cudagraph_decisions` says what was chosen and why. Config: Inductor's, and
    ``cudagraph_calls`` (timed calls per variant, default 20).
    """

    requires_cuda = True
    config_types = {**Inductor.config_types, "cudagraph_calls": ("integer",)}

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        self._decisions: list[CudaGraphDecision] = []
        self._graphs = 0
        calls = int(self.config.get("cudagraph_calls", 20))
        options, dynamo = self._options()

        def backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
            from torch._inductor import compile as inductor_compile

            name = f"graph {self._graphs}"
            self._graphs += 1
            reason = split_reason(gm)
            compile_inputs, inputs = inputs, _concrete(inputs)
            if not reason:
                launched = inductor_compile(gm, compile_inputs, options=options or None)
                chosen, decision = select_cudagraph(launched, inputs, name=name, calls=calls)
                self._decisions.append(decision)
                if has_symbolic_sizes(gm):  # one program, many shapes: a choice per shape
                    select = functools.partial(select_cudagraph, calls=calls)
                    return PerShape(launched, inputs, (chosen, decision), select, self._decisions)
                return chosen
            # Inductor partitions the graph at the work a CUDA graph cannot hold; each
            # partition is chosen for on its own (cached apart from unpartitioned programs).
            choices = PartitionChoices(name, calls=calls)
            with choices.installed():
                launched = inductor_compile(
                    gm, compile_inputs, options={**options, **choices.cache_options()}
                )
            decision = choices.choose(launched, inputs, reason)
            self._decisions += [decision, *choices.decisions]
            return launched

        compiled = compile_warm(
            module,
            example_inputs,
            warm=False,
            compile_threads=self.config.get("compile_threads", self.default_compile_threads),
            backend=backend,
            dynamic=self.config.get("dynamic", DEFAULT_DYNAMIC),
            dynamo_options=dynamo,
            settings=self.compiled_with,
        )
        self.compiled_with["options"] = options  # Inductor's, given to each graph's compile
        return compiled

    def cudagraph_decisions(self) -> list[CudaGraphDecision]:
        return list(getattr(self, "_decisions", []))


def _concrete(inputs: list[Any]) -> list[Any]:
    """A Dynamo graph's example inputs as a call takes them: a symbolic size (``dynamic``)
    is given as the value it has in this example (its hint; as it is where it has none)."""
    return [
        x.node.hint if isinstance(x, torch.SymInt) and x.node.hint is not None else x
        for x in inputs
    ]


@register_compiler("cudagraphs")
class CudaGraphs(Inductor):
    """``torch.compile(mode="reduce-overhead")``: Inductor plus CUDA-graph replay (CUDA only).

    CUDA graph trees copy every input into the graph's buffers on each replay except a
    module's parameters and inputs at static addresses. A GraphNet graph takes its weights
    as plain inputs: those the harness marked as the module's state
    (:func:`~passnet.compilers.mark_module_state`) are marked static addresses
    (unguarded: a weight at a new address re-records, as a moved parameter would), so the
    weights are read in place as the model's parameters would be."""

    mode = "reduce-overhead"
    requires_cuda = True

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        for x in example_inputs:
            if is_module_state(x):
                torch._dynamo.mark_static_address(x, guard=False)
        return super().compile(module, example_inputs)
