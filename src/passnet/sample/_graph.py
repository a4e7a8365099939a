"""The one tracer: a sample's ``GraphModule`` (or a pass's pattern) as a torch.fx graph,
node locations, and the graph's custom operators.

``model.py`` is the code Dynamo generated, so :func:`torch.fx.symbolic_trace`
reproduces the calls Dynamo recorded (``torch.sum``, ``Tensor.sum``,
``torch._C._nn.linear``, ``operator.getitem`` with slices, ...) without running
Dynamo again — except for the calls that it cannot keep as they stand:

* **factory calls with constant arguments** (``torch.arange(0, 12)``,
  ``torch.zeros(...)``, ``torch.full(...)``): FX runs them at trace time and keeps
  only the resulting tensor, as a constant of the graph module. Everything
  computed from such a tensor alone (T5's relative-position buckets, Swin's
  shifted-window mask) is then folded too, and a graph that runs the trace does
  less work than ``model.py`` does (folding T5's buckets alone made an un-rewritten
  trace of t5-efficient-large-el2 1.3x faster than eager on an H200). With
  ``keep_factories`` (the default) they are recorded as ``call_function`` nodes,
  and item assignments into their results (``mask[:, 0:3] = 1``, as Dynamo writes
  it) as ``operator.setitem`` nodes, so the traced graph has one node per call in
  ``model.py`` and runs all of them.
* ``torch._check`` and its relatives demand a real ``bool``; they are kept as leaf
  calls (they run, as checks, when the graph runs).
* ``torch.Size([s0, s0])`` with ``SymInt`` parameters of a dynamic sample (an
  ``interpolate`` size): ``torch.Size`` takes only ints, so with a traced dim it is
  recorded as a ``torch.Size`` node (inside ``model.py``, ``torch.Size`` is then a
  function, not the class: ``isinstance(x, torch.Size)`` there is not supported).

Only the sample's own module namespace sees the substitutions (its global
``torch`` is replaced by a view during the trace): torch itself is never patched,
so nothing else in the process (Dynamo's tables included) can observe a trace.

With ``locations`` every node remembers the line of ``model.py`` (or of a pass
file) it came from: :func:`node_location` renders it for diagnostics,
:func:`node_line` gives the line number.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import importlib
import importlib.util
import operator
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from passnet.errors import DatasetError

if TYPE_CHECKING:
    from passnet.sample._sample import Sample

__all__ = [
    "CHECKS",
    "FACTORIES",
    "FUNCTORCH_CALLS",
    "FUNCTORCH_CLOSERS",
    "FUNCTORCH_OPENERS",
    "LOCATION_KEY",
    "SampleTracer",
    "declared_custom_ops",
    "functorch_call",
    "functorch_levels_kept",
    "load_custom_op",
    "model_line",
    "node_line",
    "node_location",
    "op_resolves",
    "stable_toposort",
    "trace_graph",
    "trace_sample",
]

LOCATION_KEY = "passnet_location"
"""``node.meta`` key of a node's ``(file name, line)``."""

_MODEL_LINE = re.compile(r'File "[^"]*model\.py", line (\d+)')

_THIS_FILE = os.path.realpath(__file__)
# passnet's own code (the tracers, the pattern loader) is never where a node comes from;
# the samples shipped inside the package are
_PASSNET_DIR = os.path.dirname(os.path.dirname(_THIS_FILE)) + os.sep
_PASSNET_DATA_DIR = os.path.join(_PASSNET_DIR, "data") + os.sep

_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
_STDLIB_DIR = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE_DIRS = tuple(
    os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")
)


@functools.lru_cache(maxsize=4096)  # realpath per traced node made tracing slow
def _internal(filename: str) -> bool:
    if filename.startswith("<"):  # generated code (<string>, <eval_with_key>): no file to show
        return True
    path = os.path.realpath(filename)
    if path.startswith(_PASSNET_DIR) and not path.startswith(_PASSNET_DATA_DIR):
        return True
    if path.startswith(_TORCH_DIR):
        return True
    return path.startswith(_STDLIB_DIR) and not path.startswith(_SITE_DIRS)


FACTORIES: tuple[str, ...] = tuple(
    "arange as_tensor empty empty_strided eye full linspace logspace ones rand randint "
    "randn randperm scalar_tensor tensor tril_indices triu_indices zeros".split()
)
"""Tensor factories: with constant arguments FX would run them and keep only the result."""

FUNCTORCH_CALLS: tuple[str, ...] = tuple(
    "lazy_load_decompositions _vmap_increment_nesting _vmap_decrement_nesting _add_batch_dim "
    "_remove_batch_dim _jvp_increment_nesting _jvp_decrement_nesting _enter_dual_level "
    "_exit_dual_level _make_dual _unpack_dual _unwrap_for_grad".split()
)
"""``torch._functorch.predispatch`` calls (in samples extracted with an older torch,
``torch._C._functorch`` ones and ``torch._functorch.vmap.lazy_load_decompositions``) that
Dynamo writes for a ``vmap`` (transformers' attention-mask construction) or a ``jvp``: they change functorch's global state (the vmap
nesting level) or refuse proxies, so they are recorded as nodes and never run while
tracing (the traced graph runs them in order, as ``model.py`` does)."""

FUNCTORCH_OPENERS: tuple[str, ...] = (
    "_vmap_increment_nesting",
    "_jvp_increment_nesting",
    "_enter_dual_level",
)
"""The :data:`FUNCTORCH_CALLS` that open a region (values inside it are functorch's
batched or dual tensors, meaningful only there); each is closed by its
:data:`FUNCTORCH_CLOSERS` counterpart."""
FUNCTORCH_CLOSERS: tuple[str, ...] = (
    "_vmap_decrement_nesting",
    "_jvp_decrement_nesting",
    "_exit_dual_level",
)


def functorch_call(node: torch.fx.Node) -> str:
    """The name of the ``torch._functorch.predispatch`` call ``node`` makes (one of
    :data:`FUNCTORCH_CALLS`), or ``""``."""
    target = node.target
    if (
        node.op == "call_function"
        and getattr(target, "__module__", None) in _FUNCTORCH_MODULES
        and getattr(target, "__name__", None) in FUNCTORCH_CALLS
    ):
        return str(target.__name__)  # type: ignore[union-attr]
    return ""


_FUNCTORCH_MODULES = (
    "torch._functorch.predispatch",
    "torch._functorch.vmap",
    "torch._C._functorch",
)


CHECKS: tuple[str, ...] = tuple(
    "_check _check_index _check_is_size _check_not_implemented _check_type _check_value "
    "_check_with _check_tensor_all _check_tensor_all_with".split()
)
"""Assertions that call ``bool()`` on their argument and so fail on proxies."""


def _has_proxy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    found = False

    def visit(value: Any) -> Any:
        nonlocal found
        found = found or isinstance(value, torch.fx.Proxy)
        return value

    torch.fx.node.map_aggregate((args, kwargs), visit)
    return found


class _SampleProxy(torch.fx.Proxy):
    """A proxy that also records item assignment (``mask[...] = value``), as Dynamo writes it."""

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})


class _ModuleView(types.ModuleType):
    """What a module means inside ``model.py`` while it is traced: the module itself, except
    for the names that must become nodes (``overrides``, functions or nested views)."""

    def __init__(self, module: types.ModuleType, overrides: dict[str, Any]) -> None:
        super().__init__(module.__name__)
        self._module = module
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class SampleTracer(torch.fx.Tracer):
    """An FX tracer for ``model.py``: checks as leaf calls; with ``keep_factories``,
    constant factories (and item assignments into them) as nodes; with ``locations``,
    each node remembers the file and line of the code that created it."""

    def __init__(self, *, keep_factories: bool = True, locations: bool = False) -> None:
        super().__init__()
        self.keep_factories = keep_factories
        self.locations = locations

    def create_node(self, *args: Any, **kwargs: Any) -> torch.fx.Node:
        node = super().create_node(*args, **kwargs)
        if self.locations:
            frame = sys._getframe(1)
            while frame is not None and _internal(frame.f_code.co_filename):
                frame = frame.f_back
            if frame is not None:
                node.meta[LOCATION_KEY] = (
                    os.path.basename(frame.f_code.co_filename),
                    frame.f_lineno,
                )
        return node

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _SampleProxy(node, self)

    def _leaf(self, fn: Callable[..., Any], always: bool) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if always or _has_proxy(args, kwargs):
                return self.create_proxy("call_function", fn, args, kwargs)
            return fn(*args, **kwargs)

        return call

    def _size(self, *args: Any) -> Any:
        """``torch.Size`` inside ``model.py``: a node when a dim is traced, else the real one."""
        if _has_proxy(args, {}):
            return self.create_proxy("call_function", torch.Size, args, {})
        return torch.Size(*args)

    def _functorch_views(self) -> dict[str, _ModuleView]:
        """``torch._functorch`` and ``torch._C`` as ``model.py`` sees them: every
        :data:`FUNCTORCH_CALLS` function, in each spelling Dynamo writes, a leaf call."""
        tree: dict[str, Any] = {}
        for path, module in _functorch_modules().items():
            calls = {
                name: self._leaf(getattr(module, name), True)
                for name in FUNCTORCH_CALLS
                if hasattr(module, name)
            }
            *parents, leaf = path.split(".")
            node = tree
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = (module, calls)

        def view(name: str, entry: Any, parent: types.ModuleType) -> _ModuleView:
            if isinstance(entry, tuple):
                return _ModuleView(entry[0], entry[1])
            module = getattr(parent, name)
            return _ModuleView(module, {k: view(k, v, module) for k, v in entry.items()})

        return {name: view(name, entry, torch) for name, entry in tree.items()}

    @contextlib.contextmanager
    def _torch_view(self, root: Any) -> Iterator[None]:
        # a module's forward, or a plain function (a pass's pattern)
        code = (
            root if isinstance(root, types.FunctionType) else getattr(type(root), "forward", None)
        )
        namespace = getattr(code, "__globals__", None)
        if (
            not isinstance(namespace, dict)
            or namespace.get("torch") is not torch
            or str(namespace.get("__name__", "")).startswith("torch.")
        ):
            yield
            return
        groups = [(CHECKS, False)]
        if self.keep_factories:
            groups.append((FACTORIES, True))
        overrides: dict[str, Any] = {
            name: self._leaf(getattr(torch, name), always)
            for names, always in groups
            for name in names
            if hasattr(torch, name)
        }
        # ``torch.Size([s0, s0])`` (an ``interpolate`` size, as Dynamo writes it for a dynamic
        # sample) is built from SymInt parameters: a node, since Size() takes only ints
        overrides["Size"] = self._size
        overrides.update(self._functorch_views())
        namespace["torch"] = _ModuleView(torch, overrides)
        try:
            yield
        finally:
            namespace["torch"] = torch

    def trace(self, root: Any, concrete_args: dict[str, Any] | None = None) -> torch.fx.Graph:
        with functorch_levels_kept(), self._torch_view(root):
            return super().trace(root, concrete_args)


def _functorch_modules() -> dict[str, types.ModuleType]:
    """The modules Dynamo writes functorch calls from, by their dotted path below ``torch``:
    ``torch._functorch.predispatch`` (torch >= 2.6), or ``torch._C._functorch`` with
    ``torch._functorch.vmap.lazy_load_decompositions`` (earlier)."""
    found = {"_C._functorch": torch._C._functorch}
    for name in ("predispatch", "vmap"):
        try:
            found[f"_functorch.{name}"] = importlib.import_module(f"torch._functorch.{name}")
        except ImportError:  # a torch without it writes no such calls
            pass
    return found


@contextlib.contextmanager
def functorch_levels_kept() -> Iterator[None]:
    """Leave functorch's vmap nesting as it was, also when a trace or a run of a graph
    fails half-way through a ``vmap`` block: a level left behind makes every later random call in the process fail
    ("vmap: called random operation while in randomness error mode")."""
    level = torch._C._functorch.maybe_current_level()
    try:
        yield
    finally:
        while (now := torch._C._functorch.maybe_current_level()) is not None and now != level:
            torch._C._functorch._vmap_decrement_nesting()


def trace_graph(
    module: torch.nn.Module | Callable[..., Any],
    *,
    locations: bool = True,
    keep_factories: bool = True,
) -> torch.fx.GraphModule:
    """A fresh FX ``GraphModule`` of ``module`` (a sample's ``GraphModule``, or a pattern
    function): the graph passes are matched against and datasets are cut from.

    Always a fresh trace, also of an ``fx.GraphModule``: rewriting must never touch the
    module the harness runs eagerly. ``keep_factories=False`` folds constant factories
    as plain ``symbolic_trace`` does.
    """
    tracer = SampleTracer(keep_factories=keep_factories, locations=locations)
    graph = tracer.trace(module)
    name = module.__name__ if isinstance(module, types.FunctionType) else type(module).__name__
    return torch.fx.GraphModule(tracer.root, graph, name)


def node_location(node: torch.fx.Node) -> str | None:
    """``model.py:612``: where a node traced with ``locations`` came from, else None."""
    location = node.meta.get(LOCATION_KEY)
    return f"{location[0]}:{location[1]}" if location else None


def node_line(node: torch.fx.Node) -> int | None:
    """The ``model.py`` line a node comes from: traced here with ``locations``, or captured
    by Dynamo (whose nodes carry a ``stack_trace``); None where neither says."""
    location = node.meta.get(LOCATION_KEY)
    if location:
        return location[1] if location[0] == "model.py" else None
    found = _MODEL_LINE.findall(node.stack_trace or "")
    return int(found[-1]) if found else None


def model_line(exc: BaseException) -> int | None:
    """The innermost ``model.py`` line in the traceback of ``exc``."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith("model.py"):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def declared_custom_ops(sample: Sample) -> dict[str, dict[str, Any]]:
    """``graph_net.json`` ``custom_ops`` entries by operator (``"ns::op"``)."""
    entries = sample.graph_net.get("custom_ops", [])
    return (
        {str(e.get("op")): e for e in entries if isinstance(e, dict)}
        if isinstance(entries, list)
        else {}
    )


def op_resolves(qualname: str) -> bool:
    """True when ``torch.ops.<ns>.<op>`` exists in this process."""
    namespace, _, op = qualname.partition("::")
    try:
        getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return False
    return True


def load_custom_op(sample: Sample, entry: dict[str, Any]) -> None:
    """Make a declared custom operator available: run the sample's copy of its source
    (``custom_ops/...``) or import its module. Code already registered is not run again;
    a declared source that is missing is an error either way."""
    source = entry.get("source")
    path = sample.path / str(source) if source else None
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"{source} is declared but missing from the sample")
    if op_resolves(str(entry.get("op"))):
        return
    if path is not None:
        spec = importlib.util.spec_from_file_location(f"passnet_custom_ops_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {source}")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    elif entry.get("module"):
        importlib.import_module(str(entry["module"]))


def trace_sample(sample: Sample, *, locations: bool = True) -> torch.fx.GraphModule:
    """The FX graph of a sample's ``model.py`` (built on CPU; nothing is computed).

    Custom operators declared in ``graph_net.json`` are loaded first. Raises
    :class:`DatasetError` naming the sample, the file and the failing line.
    """
    for qualname, entry in declared_custom_ops(sample).items():
        try:
            load_custom_op(sample, entry)
        except Exception as exc:  # noqa: BLE001 - user code: reported with the operator
            raise DatasetError(
                f"cannot load custom operator {qualname}: {type(exc).__name__}: {exc}",
                sample=sample.path,
                file="graph_net.json",
                constraint="custom_op_accessible",
            ) from exc
    module = sample.build_module("cpu")
    try:
        return trace_graph(module, locations=locations)
    except Exception as exc:  # noqa: BLE001 - any tracing failure is reported with its line
        raise DatasetError(
            f"cannot trace model.py: {type(exc).__name__}: {exc}",
            sample=sample.path,
            file="model.py",
            line=model_line(exc),
            constraint="statically_analyzable",
        ) from exc


def stable_toposort(graph: torch.fx.Graph) -> None:
    """Reorder ``graph`` so every node follows its inputs, keeping the original order otherwise."""
    nodes = list(graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    if all(position[i] < position[n] for n in nodes for i in n.all_input_nodes):
        return
    pending = {n: len(set(n.all_input_nodes)) for n in nodes}
    # The output node stays last even if it is ready before side-effect nodes.
    output = [n for n in nodes if n.op == "output"]
    ready = [(position[n], id(n), n) for n in nodes if pending[n] == 0 and n.op != "output"]
    heapq.heapify(ready)
    order: list[torch.fx.Node] = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        for user in node.users:
            pending[user] -= 1
            if pending[user] == 0 and user.op != "output":
                heapq.heappush(ready, (position[user], id(user), user))
    order.extend(output)
    if len(order) != len(nodes):
        raise RuntimeError("graph has a cycle")
    anchor = order[0]
    for node in order[1:]:
        anchor.append(node)
        anchor = node
