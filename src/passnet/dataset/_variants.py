"""Dtype variants of a sample (float32 → float16 / bfloat16): the one implementation.

Both the generalize stage (:func:`passnet.dataset.generalize_sample`, dtype variants
at any shape) and reference tasks (:func:`dtype_variant`, the fp16/bf16 graphs of
``build_reference_task``) make their dtype variants here.

A float32 graph becomes ``dtype`` in one of two ways:

* **cast**: float32 inputs and weights take ``dtype``; ``model.py`` stays as traced.
* **dtype literals rewritten**: in addition, inside the graph, ``torch.float32``
  arguments (``dtype=`` of ``full``/``arange``/``tensor``, ``.to(torch.float32)``),
  ``.float()`` and the float32 extremes (``±3.4028234663852886e+38``, written for
  ``finfo(float32).min`` masks; they overflow float16) become ``dtype``'s, as the
  model would have traced in that dtype. ``model.py`` is rendered from the
  rewritten FX graph (:func:`rewrite_dtype_literals`). Graphs traced in fp32 often
  spell the dtype out (T5's RMSNorm casts to ``torch.float32``, Swin builds its
  window mask with ``dtype=torch.float32``); cast as traced, they mix dtypes and fail.

In both, batch/instance-norm running statistics stay float32 (docs/dataset_decompose.md), and
with them that norm's affine weight and bias: mixed-precision batch norm wants its
parameters in one float32 dtype (CPU kernels insist). If the variant does not run
that way it is tried keeping only the statistics, then casting everything.
Integer, bool and other floating tensors (float64) keep their dtype; min/max
metadata is clamped to the target's range.

:func:`dtype_candidates` lists the ways in order of faithfulness;
:func:`write_first_runnable` writes each until one passes the caller's check, so
every variant is validated by running it. What differs between the callers is
what they promise about the files, and stays with them:

* ``generalize_sample`` always rewrites literals (its variants compose with shape
  variants), hashes the variant canonically, records ``generalization`` in
  ``graph_net.json`` and checks outputs are finite on its device;
* :func:`cast_sample` keeps ``model.py`` as traced (``literals="never"``, the
  default) or rewrites it only when the cast graph does not run
  (``"if-needed"``, what :func:`dtype_variant` uses: reference passes are written
  against the traced graph), derives the hash from the source hash and the dtype,
  records ``dtype_generalization`` (and ``dtype_literals_rewritten``) and runs the
  variant eagerly on the CPU.

Both run their checks inside :func:`half_convolutions_in_float32`: on the CPU a
float16 convolution has only a reference kernel, hundreds of times slower than
float32 (a 9×9, 128-channel convolution of a 128×96 map: 168 s against 0.5 s).
"""

from __future__ import annotations

import hashlib
import logging
import math
import shutil
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch
import torch.fx
from torch.overrides import TorchFunctionMode

from passnet.dataset._subgraph import copy_parent_graph, render_model_source, trace_parent
from passnet.errors import PassnetError, SampleError
from passnet.sample import Sample, TensorMeta, dtype_to_str, load_sample, write_sample

__all__ = [
    "DtypeCandidate",
    "DtypeCast",
    "LiteralPolicy",
    "as_float_dtype",
    "cast_metas",
    "cast_sample",
    "dtype_candidates",
    "dtype_variant",
    "half_convolutions_in_float32",
    "normalization_parameters",
    "rewrite_dtype_literals",
    "write_first_runnable",
]

log = logging.getLogger(__name__)

LiteralPolicy = Literal["never", "if-needed", "always"]
"""When the graph's dtype literals are rewritten: never (``model.py`` as traced), only
when no cast of the traced graph runs, or always."""
LITERAL_POLICIES: tuple[str, ...] = ("never", "if-needed", "always")

_F32_MAX = torch.finfo(torch.float32).max
# The Tensor method that casts to each dtype (``.float()`` becomes the target's).
_CAST_METHOD = {
    torch.float16: "half",
    torch.bfloat16: "bfloat16",
    torch.float32: "float",
    torch.float64: "double",
}

# Argument positions (and keywords) of running statistics and affine parameters, by norm function.
_F_NORM = {
    "stats": ((1, "running_mean"), (2, "running_var")),
    "affine": ((3, "weight"), (4, "bias")),
}
_TORCH_NORM = {  # torch.batch_norm / torch.instance_norm (the ATen order)
    "stats": ((3, "running_mean"), (4, "running_var")),
    "affine": ((1, "weight"), (2, "bias")),
}


def as_float_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """``dtype`` as a floating ``torch.dtype`` (``"bfloat16"``, ``"torch.float16"`` or the dtype);
    anything else is a ``ValueError``."""
    if isinstance(dtype, torch.dtype):
        value = dtype
    else:
        value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(
            f"dtype must be a floating dtype such as float16 or bfloat16, got {dtype!r}"
        )
    return value


@dataclass(frozen=True)
class DtypeCast:
    """How a float32 graph was made ``dtype``."""

    dtype: torch.dtype
    kept_float32: tuple[str, ...]
    """Parameters left float32: normalization statistics, with or without their affine ones."""
    literals_rewritten: int
    """FX nodes whose dtype literals were rewritten (0: ``model.py`` as traced)."""

    def describe(self) -> str:
        kept = (
            f"keeping {', '.join(self.kept_float32)} float32"
            if self.kept_float32
            else "casting all"
        )
        return kept + (", dtype literals rewritten" if self.literals_rewritten else "")


@dataclass(frozen=True)
class DtypeCandidate:
    """One way to write the ``dtype`` variant: its ``model.py`` and metadata."""

    cast: DtypeCast
    source: str
    metas: tuple[TensorMeta, ...]
    """The metadata given to :func:`dtype_candidates`, in the same order, cast."""


def normalization_parameters(graph: torch.fx.Graph) -> tuple[set[str], set[str]]:
    """(running statistics, affine weights/biases): the placeholders the graph feeds to
    ``batch_norm``/``instance_norm`` (``torch.`` or ``torch.nn.functional.``) as those."""
    found: dict[str, set[str]] = {"stats": set(), "affine": set()}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if getattr(node.target, "__name__", "") not in ("batch_norm", "instance_norm"):
            continue
        functional = getattr(node.target, "__module__", "") == "torch.nn.functional"
        for kind, positions in (_F_NORM if functional else _TORCH_NORM).items():
            for pos, keyword in positions:
                arg = node.args[pos] if len(node.args) > pos else node.kwargs.get(keyword)
                if isinstance(arg, torch.fx.Node) and arg.op == "placeholder":
                    found[kind].add(str(arg.target))
    return found["stats"], found["affine"]


def _map_literals(value: Any, target: torch.dtype) -> Any:
    """``value`` (a node argument, possibly nested) with float32 dtypes and extremes made ``target``'s."""
    if value is torch.float32:
        return target
    if isinstance(value, float) and math.isfinite(value) and abs(value) >= _F32_MAX:
        return math.copysign(torch.finfo(target).max, value)
    if isinstance(value, (list, tuple)):
        mapped = [_map_literals(v, target) for v in value]
        return mapped if isinstance(value, list) else type(value)(mapped)
    if isinstance(value, dict):
        return {k: _map_literals(v, target) for k, v in value.items()}
    return value


def rewrite_dtype_literals(graph: torch.fx.Graph, dtype: torch.dtype | str) -> int:
    """Make ``graph``'s float32 dtype literals ``dtype``'s, in place; the number of nodes changed.

    ``torch.float32`` in any argument (``torch.float`` is the same object), finite
    float constants at or beyond ±finfo(float32).max (mask fill values) and
    ``.float()`` calls.
    """
    if not isinstance(graph, torch.fx.Graph):  # it rewrote model.py text before the graph did
        raise TypeError(
            f"rewrite_dtype_literals takes a torch.fx.Graph, got {type(graph).__name__}"
        )
    target = as_float_dtype(dtype)
    changed = 0
    for node in graph.nodes:
        touched = False
        if node.op == "call_method" and node.target == "float" and target in _CAST_METHOD:
            node.target = _CAST_METHOD[target]
            touched = True
        args, kwargs = _map_literals(node.args, target), _map_literals(node.kwargs, target)
        if args != node.args or kwargs != node.kwargs:
            node.args, node.kwargs = args, kwargs
            touched = True
        changed += touched
    return changed


def _clamp(value: float | None, info: torch.finfo) -> float | None:
    return None if value is None else max(min(float(value), info.max), -info.max)


def cast_metas(
    metas: Iterable[TensorMeta],
    dtype: torch.dtype | str,
    *,
    keep_float32: Collection[str] = (),
    symints: Collection[str] = (),
) -> list[TensorMeta]:
    """``metas`` with every float32 tensor made ``dtype`` (min/max clamped to its range),
    except those named in ``keep_float32`` and SymInt parameters."""
    target = as_float_dtype(dtype)
    info = torch.finfo(target)
    out = []
    for meta in metas:
        if (
            meta.dtype == torch.float32
            and meta.name not in keep_float32
            and meta.name not in symints
        ):
            meta = replace(
                meta,
                dtype=target,
                min_val=_clamp(meta.min_val, info),
                max_val=_clamp(meta.max_val, info),
            )
        out.append(meta)
    return out


def dtype_candidates(
    graph: torch.fx.Graph,
    metas: Sequence[TensorMeta],
    dtype: torch.dtype | str,
    *,
    render: Callable[[torch.fx.Graph], str],
    traced_source: str | None = None,
    literals: LiteralPolicy = "always",
    symints: Collection[str] = (),
) -> Iterator[DtypeCandidate]:
    """The ways to make float32 ``graph`` (with ``metas``) ``dtype``, most faithful first.

    Without literal rewriting (``literals`` ``never`` or ``if-needed``; needs
    ``traced_source``, the ``model.py`` of ``graph``): normalization statistics and
    their affine parameters kept float32, then the statistics alone, then nothing.
    With it (``if-needed``, after those; ``always``, only these): the same three
    on ``graph`` with its literals rewritten (in place, once the unrewritten
    candidates are consumed) and ``model.py`` made by ``render``. ``if-needed``
    adds none when the graph has no literal to rewrite (they would repeat the first three).
    """
    if literals not in LITERAL_POLICIES:
        raise ValueError(f"literals must be one of {', '.join(LITERAL_POLICIES)}, got {literals!r}")
    if literals != "always" and traced_source is None:
        raise ValueError(f"literals={literals!r} needs the traced model.py (traced_source)")
    target = as_float_dtype(dtype)
    stats, affine = normalization_parameters(graph)
    keeps = list(dict.fromkeys([frozenset(stats | affine), frozenset(stats), frozenset()]))
    # Checked above, generated lazily below: a later candidate's work (rewriting, rendering)
    # is done only when the earlier ones did not run.
    return _candidates(graph, metas, target, keeps, render, traced_source, literals, symints)


def _candidates(
    graph: torch.fx.Graph,
    metas: Sequence[TensorMeta],
    target: torch.dtype,
    keeps: list[frozenset[str]],
    render: Callable[[torch.fx.Graph], str],
    traced_source: str | None,
    literals: LiteralPolicy,
    symints: Collection[str],
) -> Iterator[DtypeCandidate]:
    def each_keep(source: str, rewritten: int) -> Iterator[DtypeCandidate]:
        for keep in keeps:
            cast = DtypeCast(target, tuple(sorted(keep)), rewritten)
            yield DtypeCandidate(
                cast, source, tuple(cast_metas(metas, target, keep_float32=keep, symints=symints))
            )

    if traced_source is not None and literals != "always":
        yield from each_keep(traced_source, 0)
        if literals == "never":
            return
    rewritten = rewrite_dtype_literals(graph, target)
    if rewritten == 0 and literals == "if-needed":
        return
    yield from each_keep(render(graph), rewritten)


def write_first_runnable(
    candidates: Iterable[DtypeCandidate],
    dst: str | Path,
    write: Callable[[Path, DtypeCandidate], object],
    check: Callable[[Path], object],
    *,
    sample: str | Path,
) -> DtypeCandidate:
    """Write each candidate at ``dst`` (``write``) and validate it (``check``, which raises
    when the variant is unusable); return the first that passes, written at ``dst``.

    A candidate that fails is removed before the next is written. When none passes,
    ``dst`` is left absent and a :class:`~passnet.errors.SampleError` (context:
    ``sample``) says why each failed.
    """
    dst = Path(dst)
    errors: list[str] = []
    dtype = None
    iterator = iter(candidates)
    while True:
        try:
            candidate = next(iterator)
        except StopIteration:
            break
        except PassnetError as exc:  # e.g. a rewritten graph that cannot be rendered
            errors.append(f"rewriting dtype literals: {exc.message}")
            break
        dtype = candidate.cast.dtype
        try:
            write(dst, candidate)
            check(dst)
        except Exception as exc:  # noqa: BLE001 - a variant that does not run is reported, not raised raw
            errors.append(f"{candidate.cast.describe()}: {type(exc).__name__}: {exc}")
            shutil.rmtree(dst, ignore_errors=True)
            continue
        return candidate
    what = dtype_to_str(dtype) if dtype is not None else "dtype"
    raise SampleError(
        f"the {what} variant does not run eagerly: " + "; ".join(errors or ["no candidate"]),
        sample=sample,
    )


_CONVOLUTIONS = frozenset(
    {
        torch.conv1d,
        torch.conv2d,
        torch.conv3d,
        torch.conv_transpose1d,
        torch.conv_transpose2d,
        torch.conv_transpose3d,
    }
)


class _HalfConvolutionsInFloat32(TorchFunctionMode):
    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in _CONVOLUTIONS:
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            if len(tensors) >= 2 and all(
                t.dtype == torch.float16 and t.device.type == "cpu" for t in tensors
            ):
                up = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
                kw = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
                return func(*up, **kw).to(torch.float16)
        return func(*args, **kwargs)


def half_convolutions_in_float32() -> TorchFunctionMode:
    """A mode (``with half_convolutions_in_float32(): ...``) in which a CPU convolution whose
    tensors are all float16 is computed in float32 and rounded to float16.

    PyTorch's float16 convolution on the CPU is a reference kernel that accumulates in
    float32 (hundreds of times slower than float32); computing in float32 and rounding
    gives the same shapes, dtypes and errors (mixed dtypes still go to the real kernel
    and fail there) and values within float16 rounding of it. Every other op, and any
    convolution off the CPU or not all-float16, runs as it is.
    """
    return _HalfConvolutionsInFloat32()


def _run_eagerly(path: Path) -> None:
    sample = load_sample(path)
    with torch.no_grad(), half_convolutions_in_float32():
        sample.build_module("cpu")(*sample.replay_inputs("cpu", seed=0))


def _write_cast(dst: Path, sample: Sample, candidate: DtypeCandidate) -> None:
    cast = candidate.cast
    graph_net = dict(sample.graph_net)
    graph_net["dtype_generalization"] = {
        "dtype": dtype_to_str(cast.dtype),
        "source_graph_hash": sample.graph_hash,
        "kept_float32": list(cast.kept_float32),
    }
    if cast.literals_rewritten:
        graph_net["dtype_literals_rewritten"] = dtype_to_str(cast.dtype)
    # One variant per source and dtype: its hash is derived from both, whichever way it was made.
    graph_hash = hashlib.sha256(f"{sample.graph_hash}:{dtype_to_str(cast.dtype)}".encode())
    n_weight = len(sample.weight_metas)
    write_sample(
        dst,
        candidate.source,
        list(candidate.metas[:n_weight]),
        input_metas=list(candidate.metas[n_weight:]),
        constraints=sample.constraints,
        graph_net=graph_net,
        graph_hash=graph_hash.hexdigest(),
    )


def cast_sample(
    src: str | Path,
    dst: str | Path,
    dtype: torch.dtype | str,
    *,
    literals: LiteralPolicy = "never",
) -> Path:
    """Write the ``dtype`` variant of float32 sample ``src`` at ``dst``, validated by running it
    eagerly on the CPU (see the module docstring for how).

    ``literals``: ``never`` (the default) keeps ``model.py`` as traced;
    ``if-needed`` rewrites its dtype literals when no cast of the traced graph
    runs; ``always`` rewrites them. ``graph_net.json`` records
    ``dtype_generalization`` (``dtype``, ``source_graph_hash``, ``kept_float32``)
    and, when literals were rewritten, ``dtype_literals_rewritten``; the hash is
    derived from the source hash and the dtype. When no variant runs, ``dst`` is
    removed and a :class:`~passnet.errors.SampleError` says why each way failed.
    """
    src, dst = Path(src), Path(dst)
    target = as_float_dtype(dtype)
    if dst.exists() and any(dst.iterdir()):
        raise SampleError("destination already exists and is not empty", sample=dst)
    sample = load_sample(src)
    graph, _ = copy_parent_graph(trace_parent(sample))
    names = list(sample.param_names)
    annotations = [dict(sample.params)[n] or "torch.Tensor" for n in names]
    candidates = dtype_candidates(
        graph,
        [*sample.weight_metas, *sample.input_metas],
        target,
        render=lambda g: render_model_source(g, names, annotations),
        traced_source=sample.model_source,
        literals=literals,
        symints={n for n in names if sample.is_symint(n)},
    )
    chosen = write_first_runnable(
        candidates,
        dst,
        lambda path, candidate: _write_cast(path, sample, candidate),
        _run_eagerly,
        sample=src,
    )
    log.info("cast %s to %s at %s (%s)", src, dtype_to_str(target), dst, chosen.cast.describe())
    return dst


def dtype_variant(src: str | Path, dst: str | Path, dtype: torch.dtype) -> Path:
    """Write the ``dtype`` variant of sample ``src`` at ``dst``, validated by running it eagerly.

    float32 is a copy of the sample itself. Other dtypes are
    :func:`cast_sample` with ``literals="if-needed"``: ``model.py`` as traced when
    a cast of it runs, else with its dtype literals rewritten. Raises
    :class:`~passnet.errors.SampleError` saying why when no variant runs.
    """
    src, dst = Path(src), Path(dst)
    if as_float_dtype(dtype) != torch.float32:
        return cast_sample(src, dst, dtype, literals="if-needed")
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        _run_eagerly(dst)
    except Exception as exc:  # noqa: BLE001 - eager failure of a sample is a sample error
        shutil.rmtree(dst)
        raise SampleError(f"does not run eagerly: {type(exc).__name__}: {exc}", sample=src) from exc
    return dst
