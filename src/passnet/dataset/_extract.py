"""Extract GraphNet samples from live models through a ``torch.compile`` backend.

The backend receives every graph Dynamo captures (a graph break gives several)
with its example inputs, and writes each as a GraphNet sample:

* ``model.py``: ``import torch`` and ``class GraphModule(torch.nn.Module)`` whose
  ``forward`` takes the Dynamo placeholders (with annotations) and holds the FX code.
  Private spellings are replaced by the public name of the same object
  (``torch._C._nn.linear`` → ``torch.nn.functional.linear``), helper callables FX
  would pass as hidden globals become imports (``operator.not_``), so the file
  imports on its own and on other torch versions. A call model.py could not
  import (a user function passed through ``allow_in_graph``) is a precise error.
* ``weight_meta.py``: every placeholder with full-precision mean/std, min/max,
  and literal data for small tensors (≤ ``float_data_limit`` elements) and for
  integer/bool tensors and tensors holding NaN/inf (≤ ``int_data_limit``), so
  token ids, positions, masks and lifted scalars replay exactly; SymInts store
  their value.
* ``input_tensor_constraints.py``: symbolic shapes (``S0``, ``S1``...) when
  extracting with ``dynamic=True``, concrete shapes otherwise.
* ``graph_net.json`` (framework, model_name, source, dynamic, custom ops,
  provenance) and ``graph_hash.txt`` (the canonical hash, computed from the
  written files: a sample that does not load back is not kept).

One graph gives ``OUT/NAME/``; several give ``OUT/NAME/subgraph_<i>/`` (GraphNet's
layout). A graph identical (same hash) to one already written in the session is
not written again.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import logging
import re
import shutil
import sys
import tempfile
import types
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy
import torch
import torch.fx

import passnet
from passnet.dataset._hash import CanonicalGraph, canonical_graph
from passnet.errors import DatasetError, PassnetError
from passnet.sample import (
    Constraints,
    TensorMeta,
    is_builtin_op_namespace,
    load_sample,
    qualified_name,
    write_sample,
)

__all__ = [
    "CapturedGraph",
    "ExtractFailure",
    "ExtractOptions",
    "ExtractResult",
    "ExtractedGraph",
    "Extractor",
    "capture_graphs",
    "extract",
    "extract_file",
    "render_model_source",
    "write_graph_sample",
]

log = logging.getLogger(__name__)


@dataclass
class ExtractOptions:
    """How graphs are captured and how much of each tensor is stored."""

    dynamic: bool | None = False
    """Passed to ``torch.compile``: True writes SymInt placeholders and symbolic shapes."""
    float_data_limit: int = 64
    """Floating tensors with at most this many elements are stored as literal data."""
    int_data_limit: int = 16384
    """Integer/bool tensors (ids, positions, masks) and floats holding NaN/inf up to this size
    are stored as literal data; larger ones keep min/max only."""
    source: str = "passnet.extract"
    """``graph_net.json`` ``source``."""
    graph_net: dict[str, Any] = field(default_factory=dict)
    """Extra ``graph_net.json`` fields (``heuristic_tag``, ``model_name``, ...); they win."""
    overwrite: bool = False
    """Replace an existing ``OUT/NAME`` instead of refusing to write into it."""


@dataclass
class CapturedGraph:
    """One Dynamo graph with the inputs it was called with."""

    gm: torch.fx.GraphModule
    example_inputs: list[Any]

    def input_sources(self) -> list[str | None]:
        """For each placeholder, the local variable it came from (``"x"``), if any."""
        out: list[str | None] = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                source = getattr(node.meta.get("grapharg"), "source", None)
                out.append(getattr(source, "local_name", None))
        return out


@dataclass
class ExtractedGraph:
    """A captured graph written as a sample."""

    index: int
    """Dynamo graph index within the session (0, 1, ... in capture order)."""
    path: Path
    graph_hash: str
    op_count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "path": str(self.path),
            "graph_hash": self.graph_hash,
            "op_count": self.op_count,
        }


@dataclass
class ExtractFailure:
    """Why a model or one of its graphs produced no sample."""

    model: str
    stage: str
    """``load`` (the model file), ``run`` (the model's forward), ``capture`` (Dynamo),
    ``serialize`` (writing or reloading the sample)."""
    message: str
    graph: int | None = None
    node: str | None = None

    def __str__(self) -> str:
        where = [f"model={self.model}"]
        if self.graph is not None:
            where.append(f"graph={self.graph}")
        if self.node:
            where.append(f"node={self.node}")
        return f"{self.stage}: {self.message} [{', '.join(where)}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "stage": self.stage,
            "message": self.message,
            "graph": self.graph,
            "node": self.node,
        }


@dataclass
class ExtractResult:
    """What one extraction session wrote, skipped and failed."""

    model: str
    out: Path
    graphs: list[ExtractedGraph] = field(default_factory=list)
    duplicates: list[tuple[int, str]] = field(default_factory=list)
    """(graph index, hash) of captured graphs identical to one already written."""
    failures: list[ExtractFailure] = field(default_factory=list)
    skipped: bool = False
    """True when the output already existed and the model was not run (resume)."""

    @property
    def ok(self) -> bool:
        return not self.failures and (bool(self.graphs) or self.skipped)

    @property
    def samples(self) -> list[Path]:
        return [g.path for g in self.graphs]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "out": str(self.out),
            "ok": self.ok,
            "skipped": self.skipped,
            "graphs": [g.to_dict() for g in self.graphs],
            "duplicates": [{"index": i, "graph_hash": h} for i, h in self.duplicates],
            "failures": [f.to_dict() for f in self.failures],
        }


# --------------------------------------------------------------------------- model.py

_STDLIB_CALLABLE_MODULES = {
    "_operator": "operator",
    "operator": "operator",
    "math": "math",
    "builtins": "",
}
# Private torch namespaces and the public namespaces that may hold the same object.
_PUBLIC_HOMES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("torch._C._nn", ("torch.nn.functional", "torch"), ""),
    ("torch._C._VariableFunctions", ("torch",), ""),
    ("torch._C._linalg", ("torch.linalg",), "linalg_"),
    ("torch._C._fft", ("torch.fft",), "fft_"),
    ("torch._C._special", ("torch.special",), "special_"),
    ("torch._C._nested", ("torch.nested",), "nested_"),
    ("torch.functional", ("torch",), ""),
    ("torch", ("torch",), "_"),  # torch._sym_sqrt -> torch.sym_sqrt
)
_DOTTED_TORCH = re.compile(r"\btorch(?:\.[A-Za-z_]\w*)+")


def _resolve(dotted: str) -> Any:
    obj: Any = torch
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _public_spelling(dotted: str) -> str:
    """The public name of the object ``dotted`` names, or ``dotted`` if it has none."""
    if dotted.startswith("torch.ops.") or not any(
        p.startswith("_") and not p.startswith("__") for p in dotted.split(".")[1:]
    ):
        return dotted
    try:
        obj = _resolve(dotted)
    except AttributeError:
        return dotted
    module, _, name = dotted.rpartition(".")
    for private, homes, prefix in _PUBLIC_HOMES:
        if module != private:
            continue
        public_name = name.removeprefix(prefix)
        for home in homes:
            candidate = f"{home}.{public_name}"
            try:
                if not public_name.startswith("_") and _resolve(candidate) is obj:
                    return candidate
            except AttributeError:
                continue
    return dotted


def _nodes_calling(gm: torch.fx.GraphModule, target: Any) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def render_model_source(gm: torch.fx.GraphModule, model: str = "", graph: int | None = None) -> str:
    """GraphNet ``model.py`` source for a Dynamo graph.

    Raises :class:`DatasetError` (with ``node``) when a call cannot be written so that the
    file imports on its own.
    """
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            raise DatasetError(
                f"node reads {node.op} {node.target!r} of the captured graph module (a nested "
                "graph such as a higher-order op body); the GraphNet format has no place for it",
                model=model,
                graph=graph,
                node=node.name,
            )
    code = gm.graph.python_code(root_module="self")
    src = code.src
    imports: set[str] = set()
    for name, value in code.globals.items():
        if name == "torch" or not re.search(rf"\b{re.escape(name)}\b", src):
            continue
        if name == "device" and value is torch.device:
            imports.add("from torch import device")
        elif name in ("inf", "nan"):
            imports.add(f"from math import {name}")
        elif name == "NoneType":
            imports.add("NoneType = type(None)")
        elif isinstance(value, types.ModuleType) and value.__name__ in ("math", "operator"):
            imports.add(
                f"import {value.__name__}" + ("" if name == value.__name__ else f" as {name}")
            )
        elif callable(value):
            src = _inline_global(src, name, value, imports, gm, model, graph)
        else:
            raise DatasetError(
                f"generated code refers to a {type(value).__name__} object {name!r} that model.py cannot hold",
                model=model,
                graph=graph,
            )
    src = _DOTTED_TORCH.sub(lambda m: _public_spelling(m.group(0)), src)
    body = [("    " + line) if line.strip() else "" for line in src.strip("\n").splitlines()]
    order = ("import ", "from ")  # imports, then from-imports, then assignments
    key = lambda line: (next((i for i, p in enumerate(order) if line.startswith(p)), 2), line)  # noqa: E731
    header = ["import torch", *sorted(imports, key=key)]
    return (
        "\n".join(header)
        + "\n\n\nclass GraphModule(torch.nn.Module):\n"
        + "\n".join(body).rstrip()
        + "\n"
    )


def _inline_global(
    src: str,
    name: str,
    value: Callable[..., Any],
    imports: set[str],
    gm: torch.fx.GraphModule,
    model: str,
    graph: int | None,
) -> str:
    """Replace a hidden FX global (``_operator_not_``) by an importable spelling."""
    qualified = qualified_name(value)
    module, _, attr = qualified.rpartition(".")
    pattern = rf"\b{re.escape(name)}\b"
    if module in _STDLIB_CALLABLE_MODULES or (not module and attr == qualified):
        public = _STDLIB_CALLABLE_MODULES.get(module, "")
        if public:
            imports.add(f"import {public}")
        return re.sub(pattern, f"{public}.{attr}" if public else attr, src)
    if module.startswith("torch"):
        try:
            if _resolve(qualified) is value:
                return re.sub(pattern, _public_spelling(qualified), src)
        except AttributeError:
            pass
    nodes = _nodes_calling(gm, value)
    raise DatasetError(
        f"calls {qualified}, which is not a torch operator, so model.py cannot import it "
        "(register it with torch.library.custom_op to keep it in extracted graphs)",
        model=model,
        graph=graph,
        node=nodes[0] if nodes else None,
    )


# --------------------------------------------------------------------------- metadata


def _source_name(node: torch.fx.Node) -> str | None:
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", None)
    if callable(name):  # a method in older torch versions, a property in newer ones
        name = name()
    return str(name) if name is not None else None


def _float_stats(meta: TensorMeta, t: torch.Tensor, options: ExtractOptions) -> None:
    values = t.detach().to("cpu", torch.float64).flatten()
    finite = values[torch.isfinite(values)]
    if finite.numel():
        meta.mean = finite.mean().item()
        meta.std = finite.std().item() if finite.numel() > 1 else 0.0
        meta.min_val = finite.min().item()
        meta.max_val = finite.max().item()
    nonfinite = finite.numel() < values.numel()
    if values.numel() <= options.float_data_limit or (
        nonfinite and values.numel() <= options.int_data_limit
    ):
        meta.data = [float(v) for v in t.detach().to("cpu").flatten().tolist()]
    elif nonfinite:
        log.warning(
            "%s holds NaN/inf in %d elements: replay will not reproduce them",
            meta.name,
            values.numel(),
        )


def tensor_meta(
    name: str, value: torch.Tensor, options: ExtractOptions, original_name: str | None = None
) -> TensorMeta:
    """Metadata of one example tensor, precise enough for a faithful replay."""
    if value.device.type == "meta" or type(value).__name__ == "FakeTensor":
        raise DatasetError("example input has no data (meta or fake tensor)", field=name)
    meta = TensorMeta(
        name, list(value.shape), value.dtype, str(value.device), original_name=original_name
    )
    with torch.no_grad():
        t = value.detach()
        if t.dtype.is_complex:
            c = t.to("cpu", torch.complex128).flatten()
            meta.mean = c.mean().real.item() if c.numel() else None
            meta.std = c.std().item() if c.numel() > 1 else 0.0
            if c.numel() <= options.float_data_limit:
                meta.data = [complex(v) for v in c.tolist()]
        elif t.dtype.is_floating_point:
            _float_stats(meta, t, options)
        elif t.numel():
            ints = t.to("cpu", torch.int64)
            meta.min_val, meta.max_val = int(ints.min()), int(ints.max())
            if t.numel() <= options.int_data_limit:
                flat = t.to("cpu").flatten().tolist()
                meta.data = (
                    [bool(v) for v in flat] if t.dtype == torch.bool else [int(v) for v in flat]
                )
    return meta


def _symint_value(value: torch.SymInt, name: str) -> int:
    hint = getattr(value.node, "hint", None)
    if hint is None:
        raise DatasetError(
            "SymInt input has no concrete example value (data-dependent size)", field=name
        )
    return int(hint)


def _constraints(gm: torch.fx.GraphModule, inputs: list[Any]) -> Constraints:
    """Symbolic shapes of the placeholders; Dynamo's ``s77`` become ``S0``, ``S1``, ..."""
    names: dict[sympy.Symbol, sympy.Symbol] = {}
    examples: dict[str, int] = {}
    shapes: dict[str, list[int | str]] = {}

    def rename(expr: sympy.Expr, hint: int | None) -> str:
        for sym in sorted(expr.free_symbols, key=str):
            if sym not in names:
                names[sym] = sympy.Symbol(f"S{len(names)}")
                if expr == sym and hint is not None:
                    examples[str(names[sym])] = hint
        return str(expr.xreplace(names))

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, inputs):
        fake = node.meta.get("example_value")
        if isinstance(value, torch.SymInt):
            shapes[str(node.target)] = []
            continue
        dims: list[int | str] = []
        for i, dim in enumerate(getattr(fake, "shape", value.shape)):
            if isinstance(dim, torch.SymInt):
                dims.append(rename(sympy.sympify(dim.node.expr), int(value.shape[i])))
            else:
                dims.append(int(dim))
        shapes[str(node.target)] = dims
    symbols = [str(s) for s in names.values()]
    return Constraints(symbols, {s: examples[s] for s in symbols if s in examples}, [], shapes)


def _custom_ops(gm: torch.fx.GraphModule, sample_dir: Path) -> list[dict[str, Any]]:
    """Operators outside torch's own namespaces, with where their definition lives.

    A definition from a user file (not an installed package) is copied into
    ``custom_ops/`` so the sample carries the code that registers the operator.
    """
    found: dict[str, dict[str, Any]] = {}
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(
            target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)
        ):
            continue
        qualname = (
            target.name()
            if isinstance(target, torch._ops.OpOverload)
            else target._qualified_op_name
        )
        qualname = qualname.split(".")[0]
        namespace = qualname.split("::")[0]
        if is_builtin_op_namespace(namespace) or qualname in found:
            continue
        entry: dict[str, Any] = {"op": qualname, "module": None, "source": None}
        opdef = getattr(getattr(torch._library, "custom_ops", None), "OPDEFS", {}).get(qualname)
        fn = getattr(opdef, "_init_fn", None)
        if fn is not None:
            entry["module"] = fn.__module__
            file = inspect.getsourcefile(fn)
            if file and "site-packages" not in file and Path(file).is_file():
                dest = sample_dir / "custom_ops" / Path(file).name
                dest.parent.mkdir(exist_ok=True)
                shutil.copyfile(file, dest)
                entry["source"] = f"custom_ops/{dest.name}"
        found[qualname] = entry
    return list(found.values())


def write_graph_sample(
    captured: CapturedGraph,
    path: Path,
    *,
    model: str,
    index: int,
    options: ExtractOptions,
) -> CanonicalGraph:
    """Write one captured graph as a sample at ``path`` and return its canonical graph.

    The sample is loaded back and hashed from its files, so a sample that does not
    round-trip raises :class:`DatasetError` (``stage`` serialize) and is not kept.
    """
    gm, inputs = captured.gm, captured.example_inputs
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        raise DatasetError(
            f"graph has {len(placeholders)} placeholders but {len(inputs)} example inputs",
            model=model,
            graph=index,
        )
    source = render_model_source(gm, model, index)
    metas = []
    for node, value in zip(placeholders, inputs):
        name = str(node.target)
        try:
            if isinstance(value, torch.SymInt):
                metas.append(
                    TensorMeta(name, [], torch.int64, "cpu", data=[_symint_value(value, name)])
                )
            elif isinstance(value, torch.Tensor):
                metas.append(tensor_meta(name, value, options, _source_name(node)))
            else:
                raise DatasetError(
                    f"placeholder of type {type(value).__name__} cannot be stored in the GraphNet format",
                    field=name,
                )
        except DatasetError as exc:
            context = {**exc.context, "model": model, "graph": index, "node": node.name}
            raise DatasetError(exc.message, **context) from exc
    graph_net: dict[str, Any] = {
        "framework": "torch",
        "num_devices_required": 1,
        "num_nodes_required": 1,
        "model_name": model,
        "source": options.source,
        "dynamic": bool(options.dynamic),
    }
    graph_net.update(options.graph_net)
    graph_net["passnet"] = {
        "version": passnet.__version__,
        "torch": torch.__version__,
        "graph_index": index,
    }
    path.mkdir(parents=True, exist_ok=True)
    custom = _custom_ops(gm, path)
    if custom:
        graph_net["custom_ops"] = custom
    write_sample(
        path,
        source,
        metas,
        constraints=_constraints(gm, inputs),
        graph_net=graph_net,
        graph_hash="0" * 64,
    )
    try:
        graph = canonical_graph(load_sample(path))
    except PassnetError as exc:
        raise DatasetError(
            f"written sample does not load back: {exc}", model=model, graph=index
        ) from exc
    (path / "graph_hash.txt").write_text(graph.graph_hash)
    return graph


# --------------------------------------------------------------------------- capture


@contextlib.contextmanager
def _capture_config() -> Iterator[None]:
    # .item() and data-dependent shapes stay inside the graph instead of breaking it.
    with torch._dynamo.config.patch(
        capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True
    ):
        yield


def capture_graphs(
    model: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic: bool | None = False,
) -> tuple[Any, list[CapturedGraph]]:
    """Run ``model(*args, **kwargs)`` through Dynamo and return (outputs, captured graphs)."""
    graphs: list[CapturedGraph] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(CapturedGraph(gm, list(example_inputs)))
        return gm.forward

    with _capture_config():
        outputs = torch.compile(model, backend=backend, dynamic=dynamic)(*args, **(kwargs or {}))
    return outputs, graphs


def _brief(message: str, lines: int = 2) -> str:
    """The first lines of a (Dynamo's are long) error message."""
    kept = [line.strip() for line in message.splitlines() if line.strip()][:lines]
    return " ".join(kept)


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "model"


class Extractor:
    """A model wrapped for extraction: call it like the model; every graph Dynamo captures
    is written under ``out/name``. Also a context manager; :attr:`result` says what happened.
    """

    def __init__(
        self,
        model: torch.nn.Module | Callable[..., Any],
        *,
        name: str,
        out: str | Path,
        options: ExtractOptions,
    ) -> None:
        self.model = model
        self.name = name
        self.options = options
        self.out = Path(out)
        self.root = self.out / _safe_name(name)
        self.result = ExtractResult(name, self.root)
        self._hashes: dict[str, Path] = {}
        self._index = 0
        self._compiled: Callable[..., Any] | None = None
        if self.root.exists() and any(self.root.iterdir()):
            if not options.overwrite:
                raise DatasetError(
                    "output folder already exists (pass overwrite=True to replace it)",
                    model=name,
                    file=self.root,
                )
            shutil.rmtree(self.root)

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc: object) -> None:
        log.info(
            "extracted %s: %d samples, %d duplicate graphs, %d failures",
            self.name,
            len(self.result.graphs),
            len(self.result.duplicates),
            len(self.result.failures),
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._compiled is None:
            self._compiled = torch.compile(
                self.model, backend=self._backend, dynamic=self.options.dynamic
            )
        try:
            with _capture_config():
                outputs = self._compiled(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - recorded, then re-raised as a DatasetError
            # Dynamo wraps an error of the model's own ops (seen while tracing with fake
            # tensors) in TorchRuntimeError: that is the forward failing, like any non-Dynamo
            # error. Dynamo's other errors mean the model cannot be captured.
            dynamo = isinstance(exc, torch._dynamo.exc.TorchDynamoException)
            stage = (
                "capture"
                if dynamo and not isinstance(exc, torch._dynamo.exc.TorchRuntimeError)
                else "run"
            )
            message = f"{type(exc).__name__}: {_brief(str(exc))}"
            self.result.failures.append(ExtractFailure(self.name, stage, message))
            what = "Dynamo cannot capture the model" if stage == "capture" else "forward failed"
            raise DatasetError(f"{what} during extraction: {message}", model=self.name) from exc
        if self._index == 0 and not any(f.stage == "capture" for f in self.result.failures):
            self.result.failures.append(
                ExtractFailure(
                    self.name,
                    "capture",
                    "Dynamo captured no graph: the forward ran without tensor operations Dynamo could "
                    "trace, or the frame was skipped (recompile limit: call torch._dynamo.reset())",
                )
            )
        return outputs

    @property
    def samples(self) -> list[Path]:
        return self.result.samples

    def _backend(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        index = self._index
        self._index += 1
        try:
            self._write(CapturedGraph(gm, list(example_inputs)), index)
        except Exception as exc:  # noqa: BLE001 - one graph failing must not stop the model or its other graphs
            context = exc.context if isinstance(exc, PassnetError) else {}
            message = (
                exc.message if isinstance(exc, PassnetError) else f"{type(exc).__name__}: {exc}"
            )
            failure = ExtractFailure(self.name, "serialize", message, index, context.get("node"))
            self.result.failures.append(failure)
            log.warning("cannot write graph %d of %s: %s", index, self.name, failure)
        return gm.forward

    def _write(self, captured: CapturedGraph, index: int) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.root.name}.", dir=self.out))
        try:
            graph = write_graph_sample(
                captured, tmp / "sample", model=self.name, index=index, options=self.options
            )
            digest = graph.graph_hash
            if digest in self._hashes:
                log.info(
                    "graph %d of %s repeats %s; not written again",
                    index,
                    self.name,
                    self._hashes[digest],
                )
                self.result.duplicates.append((index, digest))
                return
            dest = self._next_path()
            (tmp / "sample").rename(dest)
            self._hashes[digest] = dest
            self.result.graphs.append(ExtractedGraph(index, dest, digest, len(graph.ops)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _next_path(self) -> Path:
        """``root`` for the first graph; with a second one, move the first to ``subgraph_0``."""
        written = self.result.graphs
        if not written:
            self.root.parent.mkdir(parents=True, exist_ok=True)
            return self.root
        if len(written) == 1 and written[0].path == self.root:
            parked = self.root.with_name(f".{self.root.name}.subgraph_0")
            self.root.rename(parked)
            self.root.mkdir()
            parked.rename(self.root / "subgraph_0")
            written[0].path = self.root / "subgraph_0"
            self._hashes[written[0].graph_hash] = written[0].path
        return self.root / f"subgraph_{len(written)}"


def _default_name(model: Any) -> str:
    cls = model if isinstance(model, type) else type(model)
    return getattr(cls, "__name__", "model")


def extract(
    model: torch.nn.Module | type[torch.nn.Module] | None = None,
    /,
    *,
    name: str | None = None,
    out: str | Path = "extracted",
    dynamic: bool | None = False,
    source: str = "passnet.extract",
    graph_net: dict[str, Any] | None = None,
    float_data_limit: int = 64,
    int_data_limit: int = 16384,
    overwrite: bool = False,
) -> Any:
    """Wrap a model so that running it writes its graphs as GraphNet samples.

    Three spellings::

        m = passnet.extract(model, name="mlp", out="samples")   # a wrapper: call it like model
        m(x)                                                    # -> samples/mlp/

        with passnet.extract(model, name="mlp", out="samples") as m:
            m(x)
        print(m.result.samples)

        @passnet.extract(name="mlp", out="samples")              # a class decorator: instances
        class MLP(torch.nn.Module): ...                          # are Extractors

    ``name`` defaults to the model's class name. See :class:`ExtractOptions` for the rest.
    Returns an :class:`Extractor` (or, without ``model``, a decorator making one).
    """
    options = ExtractOptions(
        dynamic=dynamic,
        float_data_limit=float_data_limit,
        int_data_limit=int_data_limit,
        source=source,
        graph_net=dict(graph_net or {}),
        overwrite=overwrite,
    )

    def wrap(obj: Any) -> Any:
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):

            def construct(*args: Any, **kwargs: Any) -> Extractor:
                return Extractor(
                    obj(*args, **kwargs), name=name or obj.__name__, out=out, options=options
                )

            construct.__name__ = obj.__name__
            construct.__doc__ = obj.__doc__
            return construct
        if isinstance(obj, torch.nn.Module) or callable(obj):
            return Extractor(obj, name=name or _default_name(obj), out=out, options=options)
        raise TypeError(
            f"extract() wraps an nn.Module, a Module subclass or a callable, not {type(obj).__name__}"
        )

    return wrap if model is None else wrap(model)


# --------------------------------------------------------------------------- model files


@contextlib.contextmanager
def _importable_from(folder: Path) -> Iterator[None]:
    # A model file may import its sibling modules; the path entry is removed afterwards.
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def load_model_file(path: Path) -> types.ModuleType:
    """Import a model file (``get_model()`` / ``get_inputs()``) as a fresh module."""
    if not path.is_file():
        raise DatasetError("model file does not exist", model=path.stem, file=path)
    module_name = (
        f"passnet_model_{_safe_name(path.stem)}_{zlib.crc32(str(path.resolve()).encode()):08x}"
    )
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DatasetError("cannot import model file", model=path.stem, file=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    with _importable_from(path.parent):
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - user code: any failure is reported with the file
            sys.modules.pop(module_name, None)
            raise DatasetError(
                f"model file fails at import: {type(exc).__name__}: {exc}",
                model=path.stem,
                file=path,
            ) from exc
    for required in ("get_model", "get_inputs"):
        if not callable(getattr(module, required, None)):
            raise DatasetError(f"model file defines no {required}()", model=path.stem, file=path)
    return module


def _split_inputs(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs), {}
    return (inputs,), {}


def extract_file(
    path: str | Path,
    out: str | Path,
    *,
    name: str | None = None,
    options: ExtractOptions | None = None,
    resume: bool = True,
) -> ExtractResult:
    """Extract the model a Python file builds; never raises for a broken model.

    The file defines ``get_model()`` (returns the module) and ``get_inputs()`` (a tuple
    or list of positional inputs, a dict of keyword inputs, or one tensor), and may
    define ``GRAPH_NET = {...}`` (extra ``graph_net.json`` fields). The model runs
    once under ``torch.no_grad()``. With ``resume``, a model whose output folder
    already holds samples is skipped.
    """
    path = Path(path)
    options = options or ExtractOptions()
    name = name or path.stem
    root = Path(out) / _safe_name(name)
    if resume and not options.overwrite and root.is_dir() and any(root.rglob("graph_hash.txt")):
        result = ExtractResult(name, root, skipped=True)
        result.graphs = [
            ExtractedGraph(i, p.parent, p.read_text().strip(), 0)
            for i, p in enumerate(sorted(root.rglob("graph_hash.txt")))
        ]
        return result
    try:
        module = load_model_file(path)
        extra = getattr(module, "GRAPH_NET", None)
        file_options = ExtractOptions(
            **{**options.__dict__, "graph_net": {**(extra or {}), **options.graph_net}}
        )
        with torch.no_grad():
            model = module.get_model()
            args, kwargs = _split_inputs(module.get_inputs())
    except PassnetError as exc:
        return ExtractResult(name, root, failures=[ExtractFailure(name, "load", exc.message)])
    except Exception as exc:  # noqa: BLE001 - user code: reported, the batch carries on
        return ExtractResult(
            name, root, failures=[ExtractFailure(name, "load", f"{type(exc).__name__}: {exc}")]
        )
    try:
        extractor = Extractor(model, name=name, out=out, options=file_options)
    except DatasetError as exc:
        return ExtractResult(name, root, failures=[ExtractFailure(name, "load", str(exc))])
    torch._dynamo.reset()  # a fresh Dynamo cache per model file: no recompile limits across files
    with contextlib.suppress(DatasetError), torch.no_grad():  # the failure is in the result
        extractor(*args, **kwargs)
    return extractor.result


def dump_results(results: list[ExtractResult]) -> str:
    """JSON text of extraction results."""
    return json.dumps([r.to_dict() for r in results], indent=2)
