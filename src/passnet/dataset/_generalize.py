"""Generalization: dtype and shape variants of a sample, each validated by running it.

**Dtype variants** (float32 → float16 / bfloat16) are made by
:mod:`passnet.dataset._variants`, the one dtype-variant implementation (reference
tasks use it too), with dtype literals always rewritten: float32 tensors change
dtype, except the parameters of ``batch_norm``/``instance_norm`` (running
statistics, and the affine weight and bias with them, which is the mixed-precision
form PyTorch accepts on CPU and CUDA; failing that, the statistics alone, then
nothing); integer and bool tensors stay. Inside the graph, ``torch.float32``
arguments (``dtype=`` of ``full``/``arange``/``tensor``, ``.to(torch.float32)``)
and ``.float()`` become the target dtype, and the float32 extremes
(``-3.4028234663852886e38``, written for ``finfo.min`` masks) become the target's.
A dtype variant at a new shape is the shape variant's graph made that dtype.

**Shape variants**: a *symbol* is a dynamic dimension — ``S0``, ``S1`` ... of
``input_tensor_constraints.py``, or, when a sample declares none, dim 0 of its
user inputs if scaling it works (probing). For new symbol values, inputs get
new shapes and literal sizes in the graph are re-derived node by node
(:mod:`~passnet.dataset._shapes`); a variant that cannot be made consistent
fails at the node where it breaks.

Every variant is written with :func:`passnet.sample.write_sample`, then loaded
and run eagerly on replayed inputs; it must run and give finite outputs, or it
is reported as failed (which variant, why) and removed.

**Size budget**: a scaled shape is first made on fake tensors (shapes only); when its
inputs and outputs take more than ``max_variant_mb`` it is not run nor written, in
any dtype, and each of its variants is recorded ``too_large`` with the bytes and the
bound. The dtype variants of the unscaled sample are always tried. The fake run of a
scaled shape is made once and serves its float32 and dtype variants alike.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import shutil
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from passnet.dataset._catalog import sample_kind, sample_provenance
from passnet.dataset._layout import relative_name, resolve_name
from passnet.dataset._shapes import GeneralizeError, run_graph, value_rule
from passnet.dataset._stage import ChildDeath, SampleJob, Send, Stage, run_stage
from passnet.dataset._subgraph import (
    ParentGraph,
    canonical_hash,
    copy_parent_graph,
    render_model_source,
    trace_parent,
)
from passnet.dataset._variants import (
    dtype_candidates,
    half_convolutions_in_float32,
    write_first_runnable,
)
from passnet.errors import PassnetError
from passnet.record import ErrorInfo, read_jsonl
from passnet.sample import (
    Constraints,
    TensorMeta,
    load_sample,
    recorded_hash,
    replay_value,
    write_sample,
)

__all__ = [
    "GeneralizeError",
    "GeneralizeResult",
    "Variant",
    "VariantRecord",
    "VariantStatus",
    "generalize_sample",
    "generalize_samples",
    "infer_symbolic_dims",
    "SymbolicDims",
    "plan_variants",
    "read_generalize_manifest",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4
"""2: variant status ``too_large``, variant ``nbytes`` and ``elapsed_s``; 3: status
``duplicate`` and ``duplicate_of``; 4: ``fingerprint``, the stage options' digest (older
versions are read, and done again: they have none)."""
DEFAULT_MAX_VARIANT_MB = 64.0
"""Default bound on a shape variant's inputs plus outputs, in MB (10**6 bytes)."""
DTYPE_NAMES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


class VariantStatus(str, Enum):
    WRITTEN = "written"
    FAILED = "failed"
    TOO_LARGE = "too_large"
    """A shape variant whose inputs and outputs exceed the size bound: not run, not written."""


@dataclass(frozen=True)
class Variant:
    """A dtype (None: unchanged) and new values for some symbols."""

    dtype: torch.dtype | None = None
    sizes: tuple[tuple[str, int], ...] = ()

    @property
    def name(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.") if self.dtype is not None else "float32"
        return dtype + "".join(f"_{s}-{v}" for s, v in self.sizes)


@dataclass
class VariantRecord:
    """Outcome of one variant."""

    name: str
    dtype: str
    sizes: dict[str, int]
    status: VariantStatus
    path: str = ""
    reason: str = ""
    graph_hash: str = ""
    rewrites: int = 0
    """Literal sizes rewritten in the graph."""
    nbytes: int = 0
    """Bytes of a shape variant's inputs and outputs, as its float32 graph (0: unscaled)."""
    elapsed_s: float = 0.0
    """Wall time of this variant, its share of the scaled shape's fake run included."""


@dataclass
class GeneralizeResult:
    """All variants of one sample: status ``ok``, ``duplicate`` (not run: another sample
    has its graph), or what went wrong (``error``, ``timeout``, ``crashed``,
    ``out_of_memory``)."""

    sample: str
    graph_hash: str
    status: str
    variants: list[VariantRecord] = field(default_factory=list)
    symbols: dict[str, int] = field(default_factory=dict)
    probed: bool = False
    """True when the symbols were found by probing, not declared."""
    error: ErrorInfo | None = None
    elapsed_s: float = 0.0
    name: str = ""
    """The sample's folder under the output folder (its path relative to ``root``)."""
    root: str = ""
    """The folder (resolved) the written variants' ``graph_net.json`` name their parent
    relative to (``generalization.parent``)."""
    duplicate_of: str = ""
    """Status ``duplicate``: the name of the sample with the same graph hash that was
    generalized instead."""
    fingerprint: str = ""
    """The stage options' digest (:meth:`passnet.dataset.Stage.fingerprint`): with the
    name and graph hash, the key a later run resumes by."""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for v in d["variants"]:
            v["status"] = VariantStatus(v["status"]).value
        return d


# --- symbols and variants -------------------------------------------------------------------------


def _eval_dim(dim: int | str, sizes: dict[str, int]) -> int:
    if isinstance(dim, int):
        return dim
    expr = sympy.sympify(dim)
    value = expr.subs({sympy.Symbol(k): v for k, v in sizes.items()})
    if not value.is_number or value != int(value):
        raise GeneralizeError(f"dimension {dim!r} is not an integer for {sizes}")
    return int(value)


def _user_inputs(parent: ParentGraph) -> list[str]:
    """Forward parameters that are data inputs, not weights, buffers or lifted scalars."""
    out = []
    for name in parent.sample.param_names:
        lowered = name.lower()
        if "_parameters_" in lowered or "_buffers_" in lowered or parent.sample.is_symint(name):
            continue
        meta = parent.sample.metas[name]
        if meta.shape:
            out.append(name)
    return out


def _declared_shapes(parent: ParentGraph) -> tuple[dict[str, int], dict[str, list[int | str]]]:
    c = parent.sample.constraints
    if c is None or not c.symbols:
        return {}, {}
    examples = {s: c.example_values[s] for s in c.symbols if s in c.example_values}
    shapes = {}
    for name, shape in c.input_shapes.items():
        meta = parent.sample.metas.get(name)
        if meta is None or len(shape) != len(meta.shape):
            continue
        try:
            if [_eval_dim(d, examples) for d in shape] == list(meta.shape):
                shapes[name] = shape
        except (GeneralizeError, TypeError, ValueError, sympy.SympifyError):
            log.debug("constraint shape of %s in %s is unusable: %s", name, parent.path, shape)
    return examples, shapes


class _ShapeContext:
    """Original shapes of a parent's nodes, from which shape variants are derived."""

    def __init__(self, parent: ParentGraph) -> None:
        self.parent = parent
        self.graph, _ = copy_parent_graph(parent)
        if parent.tensor_specs:  # the trace's run saw every shape: no second run
            self.old_shapes: dict[str, Any] = {
                n.name: list(shape) for n, (shape, _) in parent.tensor_specs.items()
            }
        else:
            self.old_shapes, _, _ = run_graph(
                self.graph, parent.replay_inputs(), keep_outputs=False
            )

    def variant_metas(
        self, sizes: dict[str, int], shapes: dict[str, list[int | str]], examples: dict[str, int]
    ) -> list[TensorMeta]:
        scale = {examples[s]: v for s, v in sizes.items()}
        sample = self.parent.sample
        symints = {n for n in sample.param_names if sample.is_symint(n)}
        metas = []
        for meta in self.parent.sample.weight_metas + self.parent.sample.input_metas:
            m = copy.deepcopy(meta)
            if meta.name in shapes:
                m.shape = [_eval_dim(d, {**examples, **sizes}) for d in shapes[meta.name]]
            if meta.name in symints and m.data and len(m.data) == 1:
                m.data = [value_rule(int(m.data[0]), scale)]
            elif m.shape != meta.shape and m.data is not None:
                # Literal values do not fit the new shape: replay them from their range instead.
                cast = float if m.dtype.is_floating_point else int
                values = [cast(v) for v in m.data]
                m.min_val = m.min_val if m.min_val is not None else min(values, default=None)
                m.max_val = m.max_val if m.max_val is not None else max(values, default=None)
                m.data = None
            metas.append(m)
        return metas

    def replay(self, metas: list[TensorMeta], seed: int) -> list[Any]:
        by_name = {m.name: m for m in metas}
        sample = self.parent.sample
        return [
            _to(
                replay_value(by_name[n], sample.usage[n], seed, sample.is_symint(n)),
                self.parent.device,
            )
            for n in sample.param_names
        ]

    def fake_inputs(self, metas: list[TensorMeta]) -> list[Any]:
        """Inputs without data (call inside the fake mode): tensors of the metadata's shapes."""
        by_name = {m.name: m for m in metas}
        sample = self.parent.sample
        return [
            replay_value(by_name[n], sample.usage[n], 0, True)
            if sample.is_symint(n)
            else torch.empty(by_name[n].shape, dtype=by_name[n].dtype)
            for n in sample.param_names
        ]

    def run_variant(
        self,
        sizes: dict[str, int],
        shapes: dict[str, list[int | str]],
        examples: dict[str, int],
        seed: int,
        *,
        shapes_out: dict[str, Any] | None = None,
        fake: bool = False,
    ) -> tuple[torch.fx.Graph, list[TensorMeta], dict[str, Any], int]:
        """Lockstep run for new symbol values: the rewritten graph, metadata, node shapes, rewrites.

        ``fake``: shapes only, on fake tensors (no data is computed; a data-dependent
        op fails, and the caller runs again for real). ``shapes_out``: see
        :func:`~passnet.dataset._shapes.run_graph`.
        """
        scale = {examples[s]: v for s, v in sizes.items()}
        if len(scale) != len(sizes):
            raise GeneralizeError(
                f"symbols {sorted(sizes)} share an example value; scale one at a time"
            )
        graph, _ = copy_parent_graph(self.parent)
        metas = self.variant_metas(sizes, shapes, examples)
        with contextlib.ExitStack() as stack:
            if fake:  # the inputs are made inside the fake mode
                stack.enter_context(_fake_errors_quiet())
                stack.enter_context(FakeTensorMode(shape_env=ShapeEnv()))
            node_shapes, rewritten, _ = run_graph(
                graph,
                self.fake_inputs(metas) if fake else self.replay(metas, seed),
                old_shapes=self.old_shapes,
                scale=scale,
                shapes_out=shapes_out,
                keep_outputs=False,
            )
        return graph, metas, node_shapes, rewritten

    def shape_run(
        self,
        sizes: dict[str, int],
        shapes: dict[str, list[int | str]],
        examples: dict[str, int],
        seed: int,
        *,
        shapes_out: dict[str, Any] | None = None,
    ) -> tuple[torch.fx.Graph, list[TensorMeta], dict[str, Any], int]:
        """:meth:`run_variant` for the shapes only: on fake tensors on the CPU (nothing
        computed), made again for real when a fake tensor cannot run an op (a
        data-dependent one) — a variant is validated by running it once written."""
        fake = self.parent.device == "cpu"
        if fake:
            try:
                return self.run_variant(
                    sizes, shapes, examples, seed, shapes_out=shapes_out, fake=True
                )
            except (GeneralizeError, PassnetError, RuntimeError, ValueError) as exc:
                if not _fake_limitation(exc):
                    raise
                log.debug("%s: a fake run cannot scale %s (%s)", self.parent.path, sizes, exc)
                if shapes_out is not None:
                    shapes_out.clear()
        return self.run_variant(sizes, shapes, examples, seed, shapes_out=shapes_out)


@contextlib.contextmanager
def _fake_errors_quiet() -> Iterator[None]:
    """Fake tensors log every op that fails at ERROR level before raising; here a failing
    op is an expected outcome (a size that does not scale), reported by the caller."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _to(value: Any, device: str) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _probe_symbols(
    ctx: _ShapeContext, seed: int
) -> tuple[dict[str, int], dict[str, list[int | str]]]:
    """No declared symbols: try dim 0 of the user inputs as a batch dimension."""
    names = _user_inputs(ctx.parent)
    metas = ctx.parent.sample.metas
    dims = {metas[n].shape[0] for n in names}
    if len(dims) != 1:
        return {}, {}
    batch = dims.pop()
    if batch < 1:
        return {}, {}
    shapes: dict[str, list[int | str]] = {n: ["S0", *metas[n].shape[1:]] for n in names}
    try:
        ctx.shape_run({"S0": batch * 2}, shapes, {"S0": batch}, seed)
    except (GeneralizeError, PassnetError, RuntimeError, ValueError) as exc:
        log.info("probing dim 0 of %s as a batch dimension failed: %s", ctx.parent.path, exc)
        return {}, {}
    return {"S0": batch}, shapes


@dataclass
class SymbolicDims:
    """Symbolic shapes of a parent's tensor nodes, from one scaled run per declared symbol.

    The run for symbol ``S`` doubles ``S`` and re-derives the graph's literal sizes
    (:func:`~passnet.dataset._shapes.run_graph`); a node's dimension that doubles is
    ``c*S``, one that grows 4 or 8 times ``c*S**2`` or ``c*S**3`` (a flattened square
    grid; products for several symbols), one that does not change stays an int, one
    that changes otherwise stays an int too. A run that stops at a node (a size
    that cannot be tied to the symbol, an op that breaks) still tells the shapes of the
    nodes before it: :meth:`covers` says which nodes a symbol's run reached, and
    ``failures`` why the others were not.
    """

    examples: dict[str, int] = field(default_factory=dict)
    old_shapes: dict[str, list[int]] = field(default_factory=dict)
    scaled: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Symbol → node → shape in the scaled run, for the nodes that run reached."""
    failures: dict[str, str] = field(default_factory=dict)
    """Symbol → why its scaled run stopped before the end (the node and the reason)."""

    @property
    def symbols(self) -> list[str]:
        return sorted(self.examples)

    def covers(self, symbol: str, node: str) -> bool:
        """True when the scaled run of ``symbol`` reached ``node`` (its dims are known)."""
        return node in self.scaled.get(symbol, {})

    def shape(self, node: str, symbols: Iterable[str] | None = None) -> list[int | str] | None:
        """``node``'s shape with the dims that follow ``symbols`` (default: all) written
        symbolically; None for a node that is not a tensor of the original run."""
        old = self.old_shapes.get(node)
        if old is None:
            return None
        chosen = [s for s in (self.symbols if symbols is None else symbols) if s in self.scaled]
        dims: list[int | str] = []
        for k, d in enumerate(old):
            powers: dict[str, int] = {}
            proportional = True
            for sym in chosen:
                new = self.scaled[sym].get(node)
                if new is None or len(new) != len(old) or new[k] == d:
                    continue
                power = _power_of_two(new[k], d)
                if power is None:
                    proportional = False
                    break
                powers[sym] = power
            if not powers or not proportional:
                dims.append(d)
                continue
            coeff = sympy.Rational(d, math.prod(self.examples[s] ** p for s, p in powers.items()))
            dims.append(str(coeff * sympy.Mul(*[sympy.Symbol(s) ** p for s, p in powers.items()])))
        return dims


def _power_of_two(new: int, old: int) -> int | None:
    """``p`` when ``new == old * 2**p`` for p in 1..3 (a dim of ``S``, ``S**2``, ``S**3``
    when ``S`` doubled), else None."""
    for p in (1, 2, 3):
        if new == old * 2**p:
            return p
    return None


def _int_shapes(shapes: dict[str, Any]) -> dict[str, list[int]]:
    return {
        k: v
        for k, v in shapes.items()
        if isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in v)
    }


def infer_symbolic_dims(parent: ParentGraph, seed: int = 0) -> SymbolicDims:
    """Symbolic shape of every tensor node (see :class:`SymbolicDims`), from one scaled run
    per declared symbol. On the CPU the runs are on fake tensors (shapes only, no data);
    a run a fake tensor cannot make (a data-dependent op) is made again for real."""
    examples, shapes = _declared_shapes(parent)
    if not examples:
        return SymbolicDims()
    ctx = _ShapeContext(parent)
    dims = SymbolicDims(examples=dict(examples), old_shapes=_int_shapes(ctx.old_shapes))
    for sym, value in examples.items():
        reached: dict[str, Any] = {}
        try:
            ctx.shape_run({sym: value * 2}, shapes, examples, seed, shapes_out=reached)
        except (GeneralizeError, PassnetError, RuntimeError, ValueError) as exc:
            dims.failures[sym] = str(exc)
        dims.scaled[sym] = _int_shapes(reached)
    return dims


def _fake_limitation(exc: BaseException) -> bool:
    """True when a run failed because its tensors were fake (a data-dependent op, an op
    without a fake implementation), not because of the shapes: a real run may pass."""
    cause: BaseException | None = exc
    while cause is not None:
        module = type(cause).__module__
        if module.startswith(("torch._subclasses", "torch.fx.experimental")):
            return True
        if "fake" in str(cause).lower() or "data-dependent" in str(cause).lower():
            return True
        cause = cause.__cause__
    return False


def plan_variants(
    symbols: dict[str, int],
    dtypes: Sequence[str],
    shape_factors: Sequence[int],
    *,
    cross: bool = True,
) -> list[Variant]:
    """Variants to try: each dtype at the original shape, each symbol scaled by each factor
    (float32), and — with ``cross`` — every dtype at every scaled shape."""
    targets = []
    for d in dtypes:
        if d not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype {d!r}; use one of {sorted(DTYPE_NAMES)}")
        targets.append(DTYPE_NAMES[d])
    shapes: list[tuple[tuple[str, int], ...]] = [
        ((sym, value * f),)
        for sym, value in sorted(symbols.items())
        for f in shape_factors
        if f != 1
    ]
    out = [Variant(t) for t in targets if t is not torch.float32]
    for sizes in shapes:
        out.append(Variant(None, sizes))
        if cross:
            out += [Variant(t, sizes) for t in targets if t is not torch.float32]
    return out


# --- the sample-level entry point -----------------------------------------------------------------


def _check_runs(path: Path, device: str, seed: int) -> None:
    sample = load_sample(path)
    module = sample.build_module(device)
    with torch.no_grad(), half_convolutions_in_float32():
        outputs = module(*sample.replay_inputs(device, seed))
    flat = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for i, out in enumerate(flat):
        if isinstance(out, torch.Tensor) and (out.is_floating_point() or out.is_complex()):
            if not bool(torch.isfinite(out).all()):
                raise GeneralizeError(f"output {i} has non-finite values")


def generalize_sample(
    sample: str | Path,
    out_dir: str | Path,
    *,
    dtypes: Sequence[str] = ("float16", "bfloat16"),
    shape_factors: Sequence[int] = (2, 4),
    cross: bool = True,
    device: str = "cpu",
    seed: int = 0,
    max_variant_mb: float | None = DEFAULT_MAX_VARIANT_MB,
    root: str | Path | None = None,
) -> GeneralizeResult:
    """Write validated dtype and shape variants of one sample under ``out_dir/<variant>/``.

    ``root``: the folder each variant's ``graph_net.json`` names its parent relative to
    (``generalization.parent``; default: the folder holding the sample, so the parent is
    its folder name; a sample outside ``root`` is named by its absolute path).

    Never raises for a bad sample: the result's status is ``error`` with an
    :class:`~passnet.evaluate.ErrorInfo`, and each failing variant is a
    ``failed`` :class:`VariantRecord` saying why. A scaled shape whose inputs and
    outputs (float32) take more than ``max_variant_mb`` MB (10**6 bytes; None or 0:
    no bound) is neither run nor written: its variants are ``too_large``.
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    base = Path(root) if root is not None else Path(sample).resolve().parent
    result = GeneralizeResult(
        sample=str(sample), graph_hash="", status="ok", root=str(base.resolve())
    )
    parent_name = relative_name(sample, base)
    try:
        parent = trace_parent(sample, device, seed)
        result.graph_hash = parent.sample.graph_hash
        examples, shapes = _declared_shapes(parent)
        ctx = _ShapeContext(parent)
        if not examples:
            examples, shapes = _probe_symbols(ctx, seed)
            result.probed = bool(examples)
        result.symbols = dict(examples)
        bound = int(max_variant_mb * 1e6) if max_variant_mb else None
        scaled: dict[tuple[tuple[str, int], ...], _Scaled] = {}
        for variant in plan_variants(examples, dtypes, shape_factors, cross=cross):
            t = time.perf_counter()
            shape = None
            if variant.sizes:
                if variant.sizes not in scaled:
                    scaled[variant.sizes] = _scale(parent, ctx, variant.sizes, examples, shapes)
                shape = scaled[variant.sizes]
            if shape is not None and bound is not None and shape.nbytes > bound:
                record = _too_large(variant, shape.nbytes, bound)
            else:
                record = _write_variant(
                    parent, parent_name, variant, shape, examples, shapes, out_dir, device
                )
            record.elapsed_s = time.perf_counter() - t
            result.variants.append(record)
    except PassnetError as exc:
        result.status = "error"
        result.error = ErrorInfo(type(exc).__name__, exc.message, "generalize", exc.context)
    except Exception as exc:  # noqa: BLE001 - one bad sample must not stop a batch
        result.status = "error"
        result.error = ErrorInfo(
            type(exc).__name__,
            str(exc),
            "generalize",
            {"sample": str(sample)},
            traceback.format_exc(),
        )
    result.elapsed_s = time.perf_counter() - t0
    return result


@dataclass
class _Scaled:
    """One scaled shape, made once (on fake tensors on the CPU) for all its variants."""

    graph: torch.fx.Graph | None = None
    metas: list[TensorMeta] = field(default_factory=list)
    rewrites: int = 0
    nbytes: int = 0
    """Inputs and outputs of the float32 graph."""
    error: Exception | None = None
    """Why the shape could not be made (raised again by each of its variants)."""


def _scale(
    parent: ParentGraph,
    ctx: _ShapeContext,
    sizes: tuple[tuple[str, int], ...],
    examples: dict[str, int],
    shapes: dict[str, list[int | str]],
) -> _Scaled:
    try:
        graph, metas, node_shapes, rewrites = ctx.shape_run(
            dict(sizes), shapes, examples, parent.seed
        )
    except Exception as exc:  # noqa: BLE001 - reported by each variant of this shape
        return _Scaled(error=exc)
    return _Scaled(
        graph, metas, rewrites, _inputs_outputs_nbytes(parent, graph, metas, node_shapes)
    )


def _inputs_outputs_nbytes(
    parent: ParentGraph,
    graph: torch.fx.Graph,
    metas: Sequence[TensorMeta],
    node_shapes: dict[str, Any],
) -> int:
    """Bytes of the inputs (from ``metas``) and outputs (shapes from the shape run, dtypes
    from the parent's run; 4 bytes an element where unknown)."""
    itemsize = {n.name: dtype.itemsize for n, (_, dtype) in parent.tensor_specs.items()}

    def nbytes(shape: Any, size: int) -> int:
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            return math.prod(shape) * size
        if isinstance(shape, list):
            return sum(nbytes(s, 4) for s in shape)
        return 0

    total = sum(math.prod(m.shape) * m.dtype.itemsize for m in metas)
    output = next(n for n in graph.nodes if n.op == "output")
    for node in output.all_input_nodes:
        total += nbytes(node_shapes.get(node.name), itemsize.get(node.name, 4))
    return total


def _too_large(variant: Variant, nbytes: int, bound: int) -> VariantRecord:
    reason = (
        f"inputs and outputs take {nbytes / 1e6:.1f} MB at this shape, over the bound of "
        f"{bound / 1e6:g} MB (max_variant_mb); not run"
    )
    log.info("variant %s skipped: %s", variant.name, reason)
    return VariantRecord(
        variant.name,
        str(variant.dtype or torch.float32).removeprefix("torch."),
        dict(variant.sizes),
        VariantStatus.TOO_LARGE,
        reason=reason,
        nbytes=nbytes,
    )


def _write_variant(
    parent: ParentGraph,
    parent_name: str,
    variant: Variant,
    scaled: _Scaled | None,
    examples: dict[str, int],
    shapes: dict[str, list[int | str]],
    out_dir: Path,
    device: str,
) -> VariantRecord:
    seed = parent.seed
    sizes = dict(variant.sizes)
    record = VariantRecord(
        variant.name,
        str(variant.dtype or torch.float32).removeprefix("torch."),
        sizes,
        VariantStatus.FAILED,
    )
    path = out_dir / variant.name
    try:
        if scaled is not None:
            if scaled.error is not None:
                raise scaled.error
            # Each variant gets its own copy: a dtype variant rewrites literals in place.
            graph = copy.deepcopy(scaled.graph)
            metas = copy.deepcopy(scaled.metas)
            record.rewrites, record.nbytes = scaled.rewrites, scaled.nbytes
        else:
            graph, _ = copy_parent_graph(parent)
            metas = [
                copy.deepcopy(m) for m in parent.sample.weight_metas + parent.sample.input_metas
            ]
        sample = parent.sample
        names = sample.param_names
        annotations = [dict(sample.params)[n] or "torch.Tensor" for n in names]
        n_weight = len(sample.weight_metas)
        constraints = _variant_constraints(sample.constraints, shapes, examples, sizes)

        def write(dst: Path, source: str, metas: Sequence[TensorMeta], kept: Sequence[str]) -> None:
            graph_net = dict(sample.graph_net)
            graph_net["generalization"] = {
                "parent": parent_name,
                "parent_graph_hash": sample.graph_hash,
                "dtype": record.dtype,
                "sizes": sizes,
                "protected_float32": list(kept),
            }
            record.graph_hash = canonical_hash(source, metas)
            write_sample(
                dst,
                source,
                list(metas[:n_weight]),
                input_metas=list(metas[n_weight:]),
                constraints=constraints,
                graph_net=graph_net,
                graph_hash=record.graph_hash,
            )

        if path.exists():
            shutil.rmtree(path)
        if variant.dtype is None:
            write(path, render_model_source(graph, names, annotations), metas, [])
            _check_runs(path, device, seed)
        else:
            # The one dtype-variant implementation, literals always rewritten: the variant is
            # the graph as traced in that dtype (the last candidate written is the one kept).
            candidates = dtype_candidates(
                graph,
                metas,
                variant.dtype,
                render=lambda g: render_model_source(g, names, annotations),
                literals="always",
                symints={n for n in names if sample.is_symint(n)},
            )
            chosen = write_first_runnable(
                candidates,
                path,
                lambda dst, c: write(dst, c.source, c.metas, c.cast.kept_float32),
                lambda dst: _check_runs(dst, device, seed),
                sample=sample.path,
            )
            record.rewrites += chosen.cast.literals_rewritten
    except PassnetError as exc:
        record.reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - a variant that breaks is reported, not raised
        record.reason = f"{type(exc).__name__}: {exc}"
    else:
        record.status = VariantStatus.WRITTEN
        record.path = str(path)
        return record
    if path.exists():
        shutil.rmtree(path)
    log.info("variant %s of %s failed: %s", variant.name, parent.path, record.reason)
    return record


def _variant_constraints(
    original: Constraints | None,
    shapes: dict[str, list[int | str]],
    examples: dict[str, int],
    sizes: dict[str, int],
) -> Constraints:
    values = {**examples, **sizes}
    if original is not None and original.symbols:
        c = copy.deepcopy(original)
        c.example_values = {s: values.get(s, v) for s, v in c.example_values.items()}
        return c
    symbols = sorted(examples)
    return Constraints(
        symbols=symbols, example_values={s: values[s] for s in symbols}, input_shapes=dict(shapes)
    )


MANIFEST = "generalize.jsonl"


def read_generalize_manifest(path: str | Path) -> list[GeneralizeResult]:
    """Read a ``generalize.jsonl`` (a torn last line is skipped with a warning; any other bad
    line is an ``InputFormatError`` with file and line)."""
    return read_jsonl(path, _result_from_dict, what="a generalize result")


def _result_from_dict(d: dict[str, Any]) -> GeneralizeResult:
    if d.get("schema_version", 1) > SCHEMA_VERSION:
        raise ValueError(f"schema {d['schema_version']} is newer than {SCHEMA_VERSION}")
    d["variants"] = [
        VariantRecord(**{**v, "status": VariantStatus(v["status"])}) for v in d["variants"]
    ]
    d["error"] = ErrorInfo(**d["error"]) if d.get("error") else None
    return GeneralizeResult(**d)


DEFAULT_TIMEOUT_S = 600.0
"""Default time bound of one sample's generalization, in an isolated run."""


@dataclass(frozen=True)
class GeneralizeStage(Stage[GeneralizeResult]):
    """``generalize`` as a dataset stage: one sample's dtype and shape variants into
    ``OUT/<name>/<variant>/``; ``options`` go to :func:`generalize_sample`."""

    verb: ClassVar[str] = "generalize"
    records_file: ClassVar[str] = MANIFEST
    options: Mapping[str, Any] = field(default_factory=dict)

    def fingerprint_options(self) -> dict[str, Any]:
        return {"options": dict(self.options)}

    def keep(self, before: GeneralizeResult, retry_failed: bool) -> bool:
        return before.status in ("ok", "duplicate")

    def record(self, data: dict[str, Any]) -> GeneralizeResult:
        return _result_from_dict(data)

    def catalog(self, catalog: Any, record: GeneralizeResult) -> None:
        _record_variants(catalog, record)

    def work(self, job: SampleJob, send: Send) -> GeneralizeResult:
        send(("stage", "generalize"))
        return generalize_sample(job.sample, job.out_dir, root=job.root or None, **self.options)

    def failed(
        self, job: SampleJob, death: ChildDeath, provisional: GeneralizeResult | None
    ) -> GeneralizeResult:
        return GeneralizeResult(
            sample=job.sample,
            graph_hash=recorded_hash(job.sample),
            status=death.kind,
            error=death.error(job.sample),
        )


def _duplicates(
    todo: list[tuple[Path, str]], previous: list[GeneralizeResult]
) -> dict[Path, GeneralizeResult]:
    """The samples of ``todo`` whose graph hash a sample before them (of the batch, in
    order, or recorded ``ok`` in the folder) has: recorded ``duplicate``, not run."""
    first_of: dict[str, str] = {}
    for r in previous:
        if r.status == "ok" and r.graph_hash:
            first_of.setdefault(r.graph_hash, r.name)
    found: dict[Path, GeneralizeResult] = {}
    for path, name in todo:
        digest = recorded_hash(path)
        if not digest:
            continue
        first = first_of.setdefault(digest, name)
        if first != name:
            found[path] = GeneralizeResult(
                sample=str(path), graph_hash=digest, status="duplicate", duplicate_of=first
            )
    return found


def generalize_samples(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    *,
    root: str | Path | None = None,
    resume: bool = True,
    progress: bool = False,
    catalog: Any = None,
    isolated: bool = True,
    jobs: int = 1,
    executor: Any = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_gb: float | None = 8.0,
    unique: bool = True,
    **options: Any,
) -> list[GeneralizeResult]:
    """Generalize many samples into ``out_dir/<name>/<variant>/``: the
    :class:`GeneralizeStage` run by :func:`~passnet.dataset.run_stage`. Records go to
    ``out_dir/generalize.jsonl`` as samples finish (rewritten in sample-name order when
    the run ends); with ``resume`` a sample recorded there ``ok`` or ``duplicate`` (same
    name, graph hash and options) is not done again.

    ``name`` is the sample's path relative to ``root``, chosen as for
    :func:`~passnet.dataset.decompose_samples` (the root recorded in ``out_dir``, else
    the common folder of the samples' parents), so chunks and whole runs agree.
    ``catalog``: a :class:`~passnet.dataset.Catalog` that records each written variant
    (kind ``variant``, its ``generalization`` provenance).

    With ``isolated`` (the default) each sample is generalized in its own child process,
    stopped after ``timeout_s`` and limited to ``memory_limit_gb`` of data: a sample that
    hangs or kills its process is that sample's record (status ``timeout`` or
    ``crashed``). The children run on ``executor`` (default: this machine, ``jobs`` at
    once, each with its share of the CPU cores as torch threads).

    With ``unique`` (the default) one sample per graph hash (``graph_hash.txt``) is
    generalized: a sample whose hash an earlier sample of the batch, or one recorded
    ``ok`` in ``out_dir``, already has is recorded ``duplicate`` (``duplicate_of``: that
    sample's name) and not run; its variants would be that sample's."""
    stage = GeneralizeStage(
        timeout_s=timeout_s, memory_limit_gb=memory_limit_gb, options=dict(options)
    )
    return run_stage(
        stage,
        paths,
        out_dir,
        root=root,
        resume=resume,
        executor=executor,
        jobs=jobs,
        isolated=isolated,
        progress=progress,
        catalog=catalog,
        decided=_duplicates if unique else None,
    ).records


def _record_variants(catalog: Any, result: GeneralizeResult) -> None:
    for v in result.variants:
        if v.status is not VariantStatus.WRITTEN:
            continue
        try:
            sample = load_sample(v.path)
            provenance = sample_provenance(sample)
            written = provenance.get("generalization", {})
            if isinstance(written.get("parent"), str):  # the catalog keeps absolute paths
                parent = resolve_name(written["parent"], result.root)
                provenance["generalization"] = {**written, "parent": str(parent)}
            catalog.add_sample(
                v.path,
                kind=sample_kind(sample),
                provenance=provenance,
                sample=sample,
            )
        except PassnetError as exc:
            log.warning("catalog: cannot record variant %s: %s", v.path, exc)
