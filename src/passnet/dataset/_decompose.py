"""Decomposition of samples into fusible, classical and single-op subgraph samples.

For each kind, candidate op ranges come from:

* ``fusible`` — :mod:`~passnet.dataset._fusible` (one Inductor compilation mapped
  back to FX nodes, or the every-prefix reference): spans of 2..35 operators that
  contain a kernel that fuses (Inductor-generated code, or an extern call that
  replaced several operators, such as attention);
* ``classical`` — :mod:`~passnet.dataset._fold` (recursive folding): occurrences of
  folded motifs of 4..62 operators, from the sample's own folding or from a fixed
  motif table (a ``folding.json`` of a corpus), never from whichever other samples
  share the batch;
* ``single-op`` — every unit (an operator with the ``getitem`` nodes that unpack
  its tuple output; metadata nodes such as ``size()`` are recomputed where used),
  except constant producers, which have no input.

Every candidate is extracted (:mod:`~passnet.dataset._subgraph`) and given its
canonical hash; within one sample and kind, the first candidate of each hash is run
on the parent's values at its cut and compared with the parent (one lockstep run of
the parent serves every kind), written in the GraphNet layout with provenance in
``graph_net.json``, reloaded and run on replayed inputs; the others with that hash
are duplicates of it (if it fails, the next one is tried). Every candidate ends as a
:class:`SubgraphRecord` (written / duplicate / skipped / failed, with the reason).

A batch (:func:`decompose_samples`, the :class:`DecomposeStage` run by
:func:`~passnet.dataset.run_stage`) runs each sample in its own child process
(:func:`passnet.isolate.run_isolated`) with a time limit and a memory limit: a
sample that crashes, hangs or runs out of memory ends as that sample's record.
"""

from __future__ import annotations

import copy
import json
import logging
import resource
import shutil
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

import sympy
import torch

from passnet.dataset._fold import Folding, apply_folding, fold_sequences, motif_occurrences
from passnet.dataset._fusible import analyze_fusible, fusible_ranges
from passnet.dataset._generalize import SymbolicDims, infer_symbolic_dims
from passnet.dataset._layout import relative_name, resolve_name
from passnet.dataset._lockstep import RangeCheck, run_lockstep
from passnet.dataset._stage import ChildDeath, SampleJob, Send, Stage, run_stage
from passnet.dataset._subgraph import (
    OpRange,
    ParentGraph,
    Subgraph,
    SubgraphError,
    canonical_hash,
    extract_subgraph,
    tensor_meta_from_value,
    trace_parent,
    unit_ranges,
)
from passnet.errors import DatasetError, PassnetError
from passnet.record import ErrorInfo, read_jsonl
from passnet.sample import (
    Constraints,
    TensorMeta,
    functorch_levels_kept,
    load_sample,
    replay_cache,
    write_sample,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT_GB",
    "DEFAULT_OP_BOUNDS",
    "DEFAULT_TIMEOUT_S",
    "DecomposeResult",
    "DecomposeStatus",
    "SubgraphKind",
    "SubgraphRecord",
    "SubgraphStatus",
    "build_motif_table",
    "decompose_sample",
    "decompose_samples",
    "read_decompose_manifest",
    "write_op_ranges",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
"""Of a ``decompose.jsonl`` record. 3: ``fingerprint``, the stage options' digest (older
records load, and are done again: they have none). Version 1 (no ``name``, ``root``,
``op_sequence``, symbol counts, ``peak_rss_mb``) still loads."""
MANIFEST = "decompose.jsonl"
DEFAULT_TIMEOUT_S = 900.0
"""Per sample (a child that takes longer ends as ``timeout``)."""
DEFAULT_MEMORY_LIMIT_GB = 8.0
"""Per sample: the child's data segment (``RLIMIT_DATA``); an allocation beyond it fails
and the sample ends as ``out_of_memory``."""
_COPIES = 3
"""A decomposition holds a sample's tensors about three times (the trace's inputs, the
lockstep run's, a written subgraph's replay); more than the limit allows is ``too_large``."""
REPLAY_CACHE_BYTES = 512 * 2**20
"""Replayed tensors a decomposition keeps to copy rather than draw again
(:func:`passnet.sample.replay_cache`): at most this much memory on top of the copies."""
_INHERITED_FIELDS = (
    "framework",
    "model_name",
    "source",
    "heuristic_tag",
    "original_tag",
    "num_devices_required",
    "num_nodes_required",
)
"""``graph_net.json`` fields a subgraph keeps from its parent."""


class SubgraphKind(str, Enum):
    FUSIBLE = "fusible"
    CLASSICAL = "classical"
    SINGLE_OP = "single-op"

    @classmethod
    def parse(cls, value: str | SubgraphKind) -> SubgraphKind:
        """Accepts ``single-op`` and ``single_op``."""
        if isinstance(value, SubgraphKind):
            return value
        try:
            return cls(str(value).replace("_", "-"))
        except ValueError:
            known = ", ".join(k.value for k in cls)
            raise DatasetError(f"unknown subgraph kind {value!r}; use {known}") from None


DEFAULT_OP_BOUNDS: dict[SubgraphKind, tuple[int, int]] = {
    SubgraphKind.FUSIBLE: (2, 35),
    SubgraphKind.CLASSICAL: (4, 62),
    SubgraphKind.SINGLE_OP: (1, 1),
}
"""Operator counts per kind (PassNet §3.3: fusible 2..35, classical 4..62)."""
DEFAULT_KINDS = (SubgraphKind.FUSIBLE, SubgraphKind.CLASSICAL, SubgraphKind.SINGLE_OP)


class SubgraphStatus(str, Enum):
    WRITTEN = "written"
    DUPLICATE = "duplicate"
    """Same canonical hash as a subgraph already written for this sample and kind."""
    SKIPPED = "skipped"
    """Not a subgraph worth writing (too long, a constant, a forbidden cut)."""
    FAILED = "failed"
    """Could not be made into a faithful, runnable sample (the reason says why)."""


class DecomposeStatus(str, Enum):
    """How the decomposition of one sample ended."""

    OK = "ok"
    ERROR = "error"
    """The sample cannot be traced or run, or a kind failed (``errors`` say which and why)."""
    TOO_LARGE = "too_large"
    """Its tensors alone, by its metadata, exceed the memory limit: not started."""
    OUT_OF_MEMORY = "out_of_memory"
    """An allocation failed at the memory limit."""
    TIMEOUT = "timeout"
    """The child ran past the time limit and was stopped."""
    CRASHED = "crashed"
    """The child died (a signal, an abort); ``errors`` hold the end of its stderr."""


@dataclass
class SubgraphRecord:
    """What became of one candidate range."""

    kind: str
    start: int
    stop: int
    """Unit range ``[start, stop)`` (see ``graph_net.json`` for node names)."""
    ops: list[str]
    status: SubgraphStatus
    path: str = ""
    reason: str = ""
    graph_hash: str = ""
    symbol: str = ""
    """Classical: the folded symbol this is an occurrence of."""
    duplicate_of: str = ""
    symbols: list[str] = field(default_factory=list)
    """Written: the symbolic dims (``S0``, ...) its ``input_tensor_constraints.py`` carries."""
    symbols_unknown: list[str] = field(default_factory=list)
    """Written: the parent's symbols whose dims could not be told for this subgraph (the
    symbol's scaled run of the parent stopped before the range; see ``symbols_lost``)."""


@dataclass
class DecomposeResult:
    """All subgraphs of one sample; ``status`` is a :class:`DecomposeStatus` value."""

    sample: str
    graph_hash: str = ""
    kinds: list[str] = field(default_factory=list)
    status: str = DecomposeStatus.OK.value
    name: str = ""
    """The sample's folder under the output folder (its path relative to ``root``)."""
    root: str = ""
    """The folder (resolved) the written subgraphs' ``graph_net.json`` name their parent
    relative to (``subgraph.parent``)."""
    subgraphs: list[SubgraphRecord] = field(default_factory=list)
    errors: list[ErrorInfo] = field(default_factory=list)
    units: int = 0
    op_sequence: list[str] = field(default_factory=list)
    """The canonical op name of every unit (what motif tables are folded from)."""
    compilations: int = 0
    """Inductor compilations spent on fusible analysis."""
    symbols: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per symbol the parent declares: how many written subgraphs ``carry`` it in their
    constraints and for how many it is ``unknown`` (see ``symbols_lost``)."""
    symbols_lost: dict[str, str] = field(default_factory=dict)
    """Per symbol whose scaled run of the parent stopped early: where and why."""
    elapsed_s: float = 0.0
    peak_rss_mb: float = 0.0
    """Peak resident memory of the process that decomposed the sample (isolated: its child)."""
    options: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    """The stage options' digest (:meth:`passnet.dataset.Stage.fingerprint`): with the
    name and graph hash, the key a later run resumes by."""
    schema_version: int = SCHEMA_VERSION

    def count(self, kind: str | None = None, status: SubgraphStatus | None = None) -> int:
        return sum(
            1
            for r in self.subgraphs
            if (kind is None or r.kind == kind) and (status is None or r.status == status)
        )

    @property
    def symbols_unknown(self) -> int:
        """Written subgraphs with at least one symbol whose dims could not be told."""
        return sum(1 for r in self.subgraphs if r.symbols_unknown)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for r in d["subgraphs"]:
            r["status"] = SubgraphStatus(r["status"]).value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecomposeResult:
        if d.get("schema_version", 1) > SCHEMA_VERSION:
            raise DatasetError(
                f"decompose record schema {d['schema_version']} is newer than {SCHEMA_VERSION}"
            )
        subs = [
            SubgraphRecord(**{**r, "status": SubgraphStatus(r["status"])})
            for r in d.get("subgraphs", [])
        ]
        errs = [ErrorInfo(**e) for e in d.get("errors", [])]
        return cls(**{**d, "subgraphs": subs, "errors": errs, "schema_version": SCHEMA_VERSION})


def _error(exc: BaseException, stage: str, **context: Any) -> ErrorInfo:
    if isinstance(exc, PassnetError):
        return ErrorInfo(
            type(exc).__name__,
            exc.message,
            stage,
            {**exc.context, **{k: str(v) for k, v in context.items()}},
        )
    return ErrorInfo(
        type(exc).__name__,
        str(exc),
        stage,
        {k: str(v) for k, v in context.items()},
        traceback.format_exc(),
    )


def _is_out_of_memory(error: ErrorInfo) -> bool:
    from passnet.isolate import mentions_host_oom

    return error.type == "MemoryError" or mentions_host_oom(error.message)


# --- candidates -----------------------------------------------------------------------------------


@dataclass
class _Candidate:
    range: OpRange
    symbol: str = ""
    skip: str = ""


def _single_op_candidates(parent: ParentGraph) -> list[_Candidate]:
    return [_Candidate(r) for r in unit_ranges(parent)]


def _fusible_candidates(
    parent: ParentGraph, bounds: tuple[int, int], method: str, result: DecomposeResult
) -> list[_Candidate]:
    analysis = analyze_fusible(parent, method)
    result.compilations += analysis.compilations
    lo, hi = bounds
    keep = set(fusible_ranges(analysis, lo, hi))
    out = []
    for seg, fused in zip(analysis.segments, analysis.fused, strict=True):
        if seg in keep:
            out.append(_Candidate(seg))
        elif fused and len(seg) > hi:
            out.append(_Candidate(seg, skip=f"fusible span of {len(seg)} ops exceeds max_ops={hi}"))
    return out


def _classical_candidates(
    parent: ParentGraph, bounds: tuple[int, int], folding: Folding | None
) -> list[_Candidate]:
    """Motif occurrences: from the fixed table ``folding`` if given, else from folding this
    sample's own sequence (repeats within it: layers, blocks)."""
    lo, hi = bounds
    folded = (
        apply_folding(folding, parent.op_sequence)
        if folding is not None
        else fold_sequences([parent.op_sequence], max_ops=hi)
    )
    out = []
    for occ in motif_occurrences(folded, 0, min_ops=lo, max_ops=hi):
        rng = OpRange(occ.start, occ.stop)
        out.append(_Candidate(rng, occ.symbol, skip=parent.range_cut_reason(rng)))
    return out


# --- writing --------------------------------------------------------------------------------------


def _light_metas(sub: Subgraph) -> list[TensorMeta]:
    """Shapes and dtypes of a subgraph's inputs, from the trace: all its canonical hash needs."""
    parent = sub.parent
    metas = []
    for node, name in zip(sub.inputs, sub.input_names, strict=True):
        if node.op == "placeholder":
            metas.append(parent.sample.metas[str(node.target)])
        elif name in sub.constants_as_inputs:
            value = sub.constants_as_inputs[name]
            metas.append(TensorMeta(name, list(value.shape), value.dtype))
        elif node in parent.tensor_specs:
            shape, dtype = parent.tensor_specs[node]
            metas.append(TensorMeta(name, list(shape), dtype))
        else:
            raise SubgraphError(f"input {node.name} has no recorded shape", node=node.name)
    return metas


def _structure_key(sub: Subgraph, metas: Sequence[TensorMeta]) -> str:
    """The subgraph's graph with every name left out (nodes by position), and its inputs'
    shapes and dtypes: two subgraphs with one key render the same ``model.py`` up to
    names, so they have one canonical hash (which is computed once per key)."""
    index: dict[torch.fx.Node, int] = {}
    items = []
    for n in sub.graph.nodes:
        index[n] = len(index)
        args = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: f"%{index[a]}")
        target = (
            ""
            if n.op in ("placeholder", "output")
            else n.target
            if isinstance(n.target, str)
            else f"{getattr(n.target, '__module__', '')}.{getattr(n.target, '__qualname__', n.target)}"
        )
        items.append(f"{n.op}|{target}|{args!r}")
    items += [
        f"{m.shape}|{m.dtype}|{m.data if m.dtype == torch.int64 and not m.shape else ''}"
        for m in metas
    ]
    return "\n".join(items)


def _input_metas(sub: Subgraph, check: RangeCheck) -> list[TensorMeta]:
    metas = []
    for node, name in zip(sub.inputs, sub.input_names, strict=True):
        if node.op == "placeholder":
            metas.append(copy.deepcopy(sub.parent.sample.metas[str(node.target)]))
        elif name in sub.constants_as_inputs:
            metas.append(
                tensor_meta_from_value(name, sub.constants_as_inputs[name], sub.parent.meta_device)
            )
        else:
            metas.append(check.input_metas[name])
    return metas


def _fix_symbols(dims: Sequence[int | str], values: Mapping[str, int]) -> list[int | str]:
    """``dims`` with the symbols of ``values`` replaced by their values."""
    out: list[int | str] = []
    for d in dims:
        if isinstance(d, str) and any(s in d for s in values):
            expr = sympy.sympify(d).subs({sympy.Symbol(k): v for k, v in values.items()})
            out.append(int(expr) if expr.is_number else str(expr))
        else:
            out.append(d)
    return out


def _constraints(sub: Subgraph, dims: SymbolicDims) -> tuple[Constraints, list[str], list[str]]:
    """The subgraph's ``input_tensor_constraints.py``, the symbols it carries, and the
    parent's symbols that could not be told for it.

    Parent parameters copy the parent's symbolic shapes; intermediate inputs take theirs
    from the scaled runs of the parent (:class:`SymbolicDims`). A symbol is used only if
    its run reached every intermediate input of the range: else its dims would be right
    for some inputs and missing for others, and the symbol is *unknown* here (its example
    value is written instead)."""
    parent_c = sub.parent.sample.constraints
    declared = list(parent_c.symbols) if parent_c is not None else []
    examples = dict(parent_c.example_values) if parent_c is not None else {}
    intermediates = [
        n.name
        for n, name in zip(sub.inputs, sub.input_names, strict=True)
        if n.op != "placeholder" and name not in sub.constants_as_inputs
    ]
    known = [
        s for s in declared if s in dims.scaled and all(dims.covers(s, n) for n in intermediates)
    ]
    unknown = [s for s in declared if s not in known and intermediates]
    fixed = {s: examples[s] for s in unknown if s in examples}
    shapes: dict[str, list[int | str]] = {}
    for node, name in zip(sub.inputs, sub.input_names, strict=True):
        if node.op == "placeholder" and parent_c is not None and name in parent_c.input_shapes:
            shapes[name] = _fix_symbols(parent_c.input_shapes[name], fixed)
        elif node.name in intermediates:
            shape = dims.shape(node.name, known)
            if shape is not None:
                shapes[name] = shape
    used = sorted(
        {s for d in shapes.values() for x in d if isinstance(x, str) for s in declared if s in x}
    )
    return (
        Constraints(
            symbols=used,
            example_values={s: examples[s] for s in used if s in examples},
            input_shapes=shapes,
        ),
        used,
        unknown,
    )


def _provenance(sub: Subgraph, job: _Job, symbol: str) -> dict[str, Any]:
    parent = sub.parent
    start, stop = sub.call_range
    return {
        "kind": job.label,
        "parent": job.parent,
        "parent_graph_hash": parent.sample.graph_hash,
        "unit_range": [sub.range.start, sub.range.stop],
        "node_range": [start, stop],
        "nodes": [n.name for u in sub.units for n in u.nodes],
        "op_sequence": sub.op_sequence,
        "inputs": [
            {
                "name": name,
                "from": "parameter" if node.op == "placeholder" else "node",
                "parent_node": node.name,
            }
            for node, name in zip(sub.inputs, sub.input_names, strict=True)
        ],
        "outputs": [n.name for n in sub.outputs],
        **({"symbol": symbol} if symbol else {}),
    }


def _check_replay(path: Path, device: str, seed: int, parent_finite: bool) -> str:
    """Run a written sample on replayed inputs; an empty string if it is fine, else why not."""
    try:
        sample = load_sample(path)
        with torch.no_grad(), functorch_levels_kept():
            outputs = sample.build_module(device)(*sample.replay_inputs(device, seed))
    except Exception as exc:  # noqa: BLE001 - any failure disqualifies the subgraph
        return f"does not run on replayed inputs: {type(exc).__name__}: {exc}"
    flat = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    if parent_finite and any(
        isinstance(o, torch.Tensor) and o.is_floating_point() and not bool(torch.isfinite(o).all())
        for o in flat
    ):
        return "non-finite outputs on replayed inputs (the parent's values were finite)"
    return ""


@dataclass
class _Job:
    """One kind's candidates, written under ``out``; ``label`` is the kind and ``parent``
    the parent's name (:func:`~passnet.dataset._layout.relative_name`) in ``graph_net.json``."""

    label: str
    out: Path
    candidates: list[_Candidate]
    parent: str
    skip_constants: bool = False


@dataclass
class _Item:
    job: _Job
    cand: _Candidate
    sub: Subgraph
    rec: SubgraphRecord


def _write_one(item: _Item, check: RangeCheck, dims: SymbolicDims) -> bool:
    """Write a checked candidate and run it on replayed inputs; True if it is kept."""
    sub, rec = item.sub, item.rec
    parent = sub.parent
    if not check.ok:
        rec.reason = f"does not reproduce the parent: {check.reason}"
        return False
    path = item.job.out / f"{sub.range.start:04d}-{sub.range.stop:04d}"
    try:
        metas = _input_metas(sub, check)
        constraints, rec.symbols, rec.symbols_unknown = _constraints(sub, dims)
        graph_net = {k: v for k, v in parent.sample.graph_net.items() if k in _INHERITED_FIELDS}
        graph_net.setdefault("framework", "torch")
        graph_net["dynamic"] = False
        graph_net["subgraph"] = _provenance(sub, item.job, item.cand.symbol)
        write_sample(
            path,
            sub.model_source,
            metas,
            constraints=constraints,
            graph_net=graph_net,
            graph_hash=rec.graph_hash,
        )
    except MemoryError:
        raise  # the sample's status (out_of_memory), not this subgraph's
    except Exception as exc:  # noqa: BLE001 - one subgraph that cannot be written fails alone
        rec.reason = (
            f"cannot write: {exc}"
            if isinstance(exc, PassnetError)
            else f"cannot write: {type(exc).__name__}: {exc}"
        )
        shutil.rmtree(path, ignore_errors=True)
        return False
    why = _check_replay(path, parent.device, parent.seed, check.outputs_finite)
    if why:
        rec.reason = why
        shutil.rmtree(path, ignore_errors=True)
        return False
    rec.status, rec.path, rec.reason = SubgraphStatus.WRITTEN, str(path), ""
    return True


def _materialize(
    parent: ParentGraph, jobs: Sequence[_Job], dims: SymbolicDims
) -> list[SubgraphRecord]:
    """Every candidate of every job to a record; the written ones to ``job.out/<start>-<stop>/``.

    The candidates of all jobs are checked in one lockstep run of the parent; within a
    job, only the first candidate of each canonical hash is checked and written (the
    others are its duplicates), and if it fails, the next one of that hash is tried.
    """
    records: list[SubgraphRecord] = []
    by_range: dict[OpRange, Subgraph | SubgraphError] = {}
    hashes: dict[OpRange, str | Exception] = {}
    by_structure: dict[str, str] = {}
    groups: dict[tuple[int, str], list[_Item]] = {}
    for j, job in enumerate(jobs):
        for cand in job.candidates:
            ops = parent.op_sequence[cand.range.start : cand.range.stop]
            rec = SubgraphRecord(
                job.label,
                cand.range.start,
                cand.range.stop,
                ops,
                SubgraphStatus.SKIPPED,
                symbol=cand.symbol,
                reason=cand.skip,
            )
            records.append(rec)
            if cand.skip:
                continue
            if cand.range not in by_range:
                try:
                    by_range[cand.range] = extract_subgraph(parent, cand.range)
                except SubgraphError as exc:
                    by_range[cand.range] = exc
            sub = by_range[cand.range]
            if isinstance(sub, SubgraphError):
                rec.status, rec.reason = SubgraphStatus.FAILED, str(sub)
                continue
            if job.skip_constants and not any(
                parent.value_kinds.get(a) == "tensor" for a in sub.inputs
            ):
                rec.reason = "no tensor input (a constant)"
                continue
            rec.ops, rec.status = sub.op_sequence, SubgraphStatus.FAILED
            if cand.range not in hashes:
                try:
                    metas = _light_metas(sub)
                    key = _structure_key(sub, metas)
                    if key not in by_structure:
                        by_structure[key] = canonical_hash(sub.model_source, metas)
                    hashes[cand.range] = by_structure[key]
                except PassnetError as exc:
                    hashes[cand.range] = exc
            digest = hashes[cand.range]
            if isinstance(digest, Exception):
                rec.reason = f"cannot write: {digest}"
                continue
            rec.graph_hash = digest
            groups.setdefault((j, digest), []).append(_Item(job, cand, sub, rec))
    for job in jobs:
        if job.out.exists():
            shutil.rmtree(job.out)  # a re-run replaces the kind's folder as a whole
    # Round one checks the first candidate of each hash; round two, in one more run of the
    # parent, all the others of the hashes whose first candidate failed (the first of them
    # that passes is kept). Two parent runs at most, however many candidates fail.
    written: dict[tuple[int, str], str] = {}
    rounds = [[members[0] for members in groups.values()]]
    for round_no in range(2):
        pending = rounds[round_no]
        if not pending:
            break
        subs = list({id(i.sub): i.sub for i in pending}.values())
        checks, _ = run_lockstep(parent, subs, feed_forward=False, collect_metas=True)
        check_of = {id(c.subgraph): c for c in checks}
        for item in sorted(pending, key=lambda i: (i.rec.start, i.rec.stop)):
            key = (jobs.index(item.job), item.rec.graph_hash)
            if key in written:
                item.rec.status, item.rec.duplicate_of = SubgraphStatus.DUPLICATE, written[key]
            elif _write_one(item, check_of[id(item.sub)], dims):
                written[key] = item.rec.path
        if round_no == 0:
            rounds.append(
                [m for k, members in groups.items() if k not in written for m in members[1:]]
            )
    for key, members in groups.items():
        for item in members:
            if key in written and item.rec.status is SubgraphStatus.FAILED and not item.rec.reason:
                item.rec.status, item.rec.duplicate_of = SubgraphStatus.DUPLICATE, written[key]
    order = {job.label: j for j, job in enumerate(jobs)}
    records.sort(key=lambda r: (order[r.kind], r.start, r.stop))
    return records


def _record_in_catalog(catalog: Any, result: DecomposeResult) -> None:
    """Add each written subgraph of ``result`` to ``catalog`` (parent, call-node range, kind).

    The parent is the one its ``graph_net.json`` names, resolved against ``result.root``
    (the catalog keeps absolute paths, its provenance too)."""
    for rec in result.subgraphs:
        if rec.status is not SubgraphStatus.WRITTEN:
            continue
        try:
            provenance = json.loads((Path(rec.path) / "graph_net.json").read_text())["subgraph"]
            start, stop = provenance["node_range"]
            parent = resolve_name(str(provenance["parent"]), result.root)
            catalog.add_subgraph(
                parent,
                (start, stop),
                rec.path,
                kind=rec.kind,
                provenance={**provenance, "parent": str(parent)},
            )
        except (PassnetError, OSError, KeyError, ValueError) as exc:
            result.errors.append(_error(exc, "catalog", subgraph=rec.path))


def _summarize_symbols(result: DecomposeResult, parent: ParentGraph, dims: SymbolicDims) -> None:
    """Fill ``result.symbols`` / ``symbols_lost`` and warn when written subgraphs lost symbols."""
    c = parent.sample.constraints
    declared = list(c.symbols) if c is not None else []
    written = [r for r in result.subgraphs if r.status is SubgraphStatus.WRITTEN]
    result.symbols = {
        s: {
            "carried": sum(s in r.symbols for r in written),
            "unknown": sum(s in r.symbols_unknown for r in written),
        }
        for s in declared
    }
    result.symbols_lost = dict(dims.failures)
    for s in declared:
        if s not in dims.scaled and s not in result.symbols_lost:
            result.symbols_lost[s] = "the symbol's scaled run of the parent did not run"
    unknown = result.symbols_unknown
    if unknown:
        why = "; ".join(
            f"{s}: {result.symbols_lost.get(s, '?')}" for s in sorted(result.symbols_lost)
        )
        log.warning(
            "%s: %d of %d written subgraphs have symbolic dims that could not be told (%s)",
            parent.path,
            unknown,
            len(written),
            why,
        )


# --- entry points ---------------------------------------------------------------------------------


# The parent's inputs are drawn once: the lockstep run, the fusible compilation and every
# subgraph's replay that reads a parent parameter copy them from the cache (a fresh cache
# for each call).
@replay_cache(REPLAY_CACHE_BYTES)
def decompose_sample(
    sample: str | Path,
    out_dir: str | Path,
    kinds: Iterable[str | SubgraphKind] = DEFAULT_KINDS,
    *,
    op_bounds: Mapping[str, tuple[int, int]] | None = None,
    method: str = "one-compile",
    folding: Folding | None = None,
    name: str | None = None,
    root: str | Path | None = None,
    device: str = "cpu",
    seed: int = 0,
    catalog: Any = None,
    on_candidates: Any = None,
) -> DecomposeResult:
    """Decompose one sample into subgraph samples under ``out_dir/<name>/<kind>/<start>-<stop>/``.

    ``kinds``: any of ``fusible``, ``classical``, ``single-op``. ``op_bounds`` overrides
    the operator-count bounds per kind (:data:`DEFAULT_OP_BOUNDS`). ``method`` is the
    fusible analysis (``one-compile`` or ``every-prefix``). ``folding``: a fixed motif
    table for the classical kind (a corpus's ``folding.json``,
    :meth:`Folding.from_json`); without one, the sample's own sequence is folded.
    ``name`` defaults to the sample's folder name. ``root``: the folder each subgraph's
    ``graph_net.json`` names its parent relative to (``subgraph.parent``; default: the
    folder holding the sample, so the parent is its folder name; a sample outside
    ``root`` is named by its absolute path). ``catalog``: a
    :class:`~passnet.dataset.Catalog` to record each written subgraph in.
    ``on_candidates(result)`` is called once every kind's candidates are known, before
    anything is written (a provisional result to keep if the rest fails).

    Never raises for bad input: a sample that cannot be traced or run, or a kind
    that fails (e.g. Inductor cannot compile the graph), is an ``ErrorInfo`` in the
    result, whose status is then ``error`` (``out_of_memory`` when an allocation
    failed); other kinds still run.
    """
    t0 = time.perf_counter()
    kind_list = [SubgraphKind.parse(k) for k in kinds]
    bounds = dict(DEFAULT_OP_BOUNDS)
    for k, b in (op_bounds or {}).items():
        bounds[SubgraphKind.parse(k)] = (int(b[0]), int(b[1]))
    base = Path(root) if root is not None else Path(sample).resolve().parent
    result = DecomposeResult(
        sample=str(sample),
        kinds=[k.value for k in kind_list],
        root=str(base.resolve()),
        options={
            "method": method,
            "device": device,
            "seed": seed,
            "op_bounds": {k.value: list(bounds[k]) for k in kind_list},
            **({"motifs": folding.table_digest} if folding is not None else {}),
        },
    )
    try:
        parent = trace_parent(sample, device, seed)
    except Exception as exc:  # noqa: BLE001 - a broken sample is a result, not a crash
        result.status = DecomposeStatus.ERROR.value
        result.errors.append(_error(exc, "trace", sample=sample))
        result.elapsed_s = time.perf_counter() - t0
        return _finish(result)
    result.graph_hash = parent.sample.graph_hash
    result.units = len(parent.units)
    result.op_sequence = parent.op_sequence
    result.name = name or parent.sample.name
    try:
        dims = infer_symbolic_dims(parent, seed)
    except Exception as exc:  # noqa: BLE001 - symbolic dims are a bonus; static shapes still work
        log.warning("%s: no symbolic dims: %s: %s", parent.path, type(exc).__name__, exc)
        dims = SymbolicDims(failures={"*": f"{type(exc).__name__}: {exc}"})
    out_root = Path(out_dir) / result.name
    jobs: list[_Job] = []
    for kind in kind_list:
        try:
            if kind is SubgraphKind.FUSIBLE:
                candidates = _fusible_candidates(parent, bounds[kind], method, result)
            elif kind is SubgraphKind.CLASSICAL:
                candidates = _classical_candidates(parent, bounds[kind], folding)
            else:
                candidates = _single_op_candidates(parent)
            jobs.append(
                _Job(
                    kind.value,
                    out_root / kind.value,
                    candidates,
                    relative_name(sample, base),
                    skip_constants=kind is SubgraphKind.SINGLE_OP,
                )
            )
        except Exception as exc:  # noqa: BLE001 - one kind failing must not lose the others
            result.errors.append(_error(exc, kind.value, sample=parent.path))
    if on_candidates is not None:
        on_candidates(result)
    try:
        result.subgraphs += _materialize(parent, jobs, dims)
    except Exception as exc:  # noqa: BLE001 - reported as the sample's error, kinds named
        result.errors.append(_error(exc, ",".join(j.label for j in jobs), sample=parent.path))
    _summarize_symbols(result, parent, dims)
    if catalog is not None:
        _record_in_catalog(catalog, result)
    result.elapsed_s = time.perf_counter() - t0
    return _finish(result)


def _finish(result: DecomposeResult) -> DecomposeResult:
    if any(_is_out_of_memory(e) for e in result.errors):
        result.status = DecomposeStatus.OUT_OF_MEMORY.value
    elif result.errors and result.status == DecomposeStatus.OK.value:
        result.status = DecomposeStatus.ERROR.value
    result.peak_rss_mb = _peak_rss_mb()
    return result


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def write_op_ranges(
    parent: ParentGraph,
    ranges: Sequence[OpRange],
    out_dir: str | Path,
    *,
    kind: str,
    root: str | Path | None = None,
    catalog: Any = None,
) -> list[SubgraphRecord]:
    """Write chosen op ranges of a traced sample as subgraph samples, ``out_dir/<start>-<stop>/``.

    The ranges go through what :func:`decompose_sample` does with its candidates:
    each is extracted, run on the parent's values at its cut and compared with
    them, written with provenance (``graph_net.json`` ``subgraph.kind`` is
    ``kind``), reloaded and run on replayed inputs; one whose canonical hash was
    already written is a duplicate. A range that starts or stops where a
    non-tensor value crosses, or inside a functorch (``vmap``) region, is skipped.
    Every range ends as a record, in range order, whose status and reason say what
    became of it. ``out_dir`` is replaced as a whole. ``root``: as for
    :func:`decompose_sample`.
    """
    candidates = [_Candidate(r, skip=parent.range_cut_reason(r)) for r in ranges]
    base = Path(root) if root is not None else Path(parent.path).resolve().parent
    result = DecomposeResult(sample=str(parent.path), kinds=[kind], root=str(base.resolve()))
    job = _Job(kind, Path(out_dir), candidates, relative_name(parent.path, base))
    result.subgraphs = _materialize(parent, [job], SymbolicDims())
    if catalog is not None:
        _record_in_catalog(catalog, result)
    for error in result.errors:
        log.warning("%s: %s", parent.path, error.message)
    return result.subgraphs


def read_decompose_manifest(path: str | Path) -> list[DecomposeResult]:
    """Read a ``decompose.jsonl`` written by :func:`decompose_samples` (a torn last line is
    skipped with a warning; any other bad line is an ``InputFormatError`` with file and line)."""
    return read_jsonl(
        path, DecomposeResult.from_dict, what="a decompose result", errors=(DatasetError,)
    )


def build_motif_table(
    manifests: Iterable[str | Path], *, max_ops: int = 62, min_count: int = 2
) -> Folding:
    """A motif table: the op sequences recorded in ``decompose.jsonl`` files, folded together.

    Pass it to :func:`decompose_samples` (``motifs=``) for classical subgraphs that are
    frequent across the corpus, the same whichever chunk a sample is decomposed in.
    Each sample counts once (its latest record with an op sequence), in path order.
    """
    latest: dict[str, list[str]] = {}
    for manifest in manifests:
        for r in read_decompose_manifest(manifest):
            if r.op_sequence:
                latest[r.sample] = r.op_sequence
    ids = sorted(latest)
    return fold_sequences(
        [latest[i] for i in ids], max_ops=max_ops, min_count=min_count, sequence_ids=ids
    )


# --- the batch: a stage of run_stage ------------------------------------------------------------


def _preload_for_children(device: str) -> list[str]:
    """The modules the forkserver imports once for every decomposition child.

    Inductor's compiler module (seconds to import) and :mod:`~passnet.dataset._warm` (a
    first compilation and fake run, whose start-up work every child would otherwise
    repeat) only on a machine without CUDA: importing or running Inductor can query the
    device, which would mark every later fork unable to use CUDA."""
    from passnet.isolate import TORCH_PRELOAD

    wanted = [*TORCH_PRELOAD, "passnet.dataset._decompose"]
    if device == "cpu" and not torch.cuda.is_available():
        wanted += ["torch._inductor.compile_fx", "passnet.dataset._warm"]
    return wanted


@dataclass(frozen=True)
class DecomposeStage(Stage[DecomposeResult]):
    """``decompose`` as a dataset stage: one sample's subgraphs of ``kinds`` into
    ``OUT/<name>/<kind>/<start>-<stop>/``; ``options`` go to :func:`decompose_sample`."""

    verb: ClassVar[str] = "decompose"
    records_file: ClassVar[str] = MANIFEST
    per_sample_dir: ClassVar[bool] = False
    kinds: tuple[str, ...] = tuple(k.value for k in DEFAULT_KINDS)
    folding: Folding | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def fingerprint_options(self) -> dict[str, Any]:
        return {
            "kinds": list(self.kinds),
            "motifs": self.folding.table_digest if self.folding is not None else "",
            "options": dict(self.options),
        }

    def preload(self) -> list[str]:
        return _preload_for_children(self.options.get("device", "cpu"))

    def keep(self, before: DecomposeResult, retry_failed: bool) -> bool:
        return not (retry_failed and before.status != DecomposeStatus.OK.value)

    def record(self, data: dict[str, Any]) -> DecomposeResult:
        return DecomposeResult.from_dict(data)

    def catalog(self, catalog: Any, record: DecomposeResult) -> None:
        _record_in_catalog(catalog, record)

    def work(self, job: SampleJob, send: Send) -> DecomposeResult:
        """Refuse a sample too large for the memory bound, else decompose it (a
        provisional record once its candidates are known)."""
        limit = job.memory_limit_bytes
        if limit:
            try:
                needed = _COPIES * load_sample(job.sample).tensor_bytes
            except PassnetError:
                needed = 0  # decompose_sample reports the broken sample
            if needed > limit:
                result = DecomposeResult(
                    sample=job.sample,
                    kinds=list(self.kinds),
                    name=job.name,
                    status=DecomposeStatus.TOO_LARGE.value,
                )
                result.errors.append(
                    ErrorInfo(
                        "TooLarge",
                        f"its tensors take {needed / _COPIES / 2**30:.1f} GiB and a "
                        f"decomposition holds them {_COPIES} times, over the memory limit of "
                        f"{limit / 2**30:.1f} GiB: not decomposed",
                        "load",
                        {"sample": job.sample, "needed_bytes": str(needed)},
                    )
                )
                return result

        def provisional(partial: DecomposeResult) -> None:
            send(("stage", "materialize"))
            send(("provisional", partial.to_dict()))

        send(("stage", "trace"))
        return decompose_sample(
            job.sample,
            job.out_dir,
            list(self.kinds),
            folding=self.folding,
            name=job.name,
            root=job.root or None,
            on_candidates=provisional,
            **self.options,
        )

    def failed(
        self, job: SampleJob, death: ChildDeath, provisional: DecomposeResult | None
    ) -> DecomposeResult:
        result = provisional or DecomposeResult(
            sample=job.sample, kinds=list(self.kinds), name=job.name
        )
        result.status = DecomposeStatus(death.kind).value
        result.errors.append(death.error(job.sample))
        return result


def decompose_samples(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    kinds: Iterable[str | SubgraphKind] = DEFAULT_KINDS,
    *,
    root: str | Path | None = None,
    motifs: str | Path | Folding | None = None,
    resume: bool = True,
    retry_failed: bool = False,
    progress: bool = False,
    catalog: Any = None,
    isolated: bool = True,
    jobs: int = 1,
    executor: Any = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_gb: float | None = DEFAULT_MEMORY_LIMIT_GB,
    on_result: Any = None,
    **options: Any,
) -> list[DecomposeResult]:
    """Decompose many samples into ``out_dir/<name>/<kind>/<start>-<stop>/``: the
    :class:`DecomposeStage` run by :func:`~passnet.dataset.run_stage`.

    ``name`` is each sample's path relative to ``root`` (default: the root recorded in
    ``out_dir``'s records, else the common folder of the samples' parent folders; see
    :mod:`~passnet.dataset._layout`). Nothing a sample gets depends on the other samples
    of the batch: a corpus decomposed whole or in chunks gives the same files. The
    classical kind folds each sample alone, or applies the fixed motif table ``motifs``
    (a ``folding.json`` path or a :class:`Folding`; :func:`build_motif_table` makes one).

    With ``isolated`` (the default) each sample runs in its own child process, stopped
    after ``timeout_s`` and limited to ``memory_limit_gb`` of data: a crash, a hang or an
    out-of-memory failure is that sample's record (:class:`DecomposeStatus`), and the
    batch carries on. The children run on ``executor`` (default: this machine, ``jobs``
    at once, each with its share of the CPU cores as torch threads). Records are
    appended to ``out_dir/decompose.jsonl`` as samples finish, and the file is rewritten
    in sample-name order when the run ends; with ``resume`` a sample already recorded
    there (same name, graph hash and options) is not done again, unless
    ``retry_failed`` and its status is not ``ok``. ``on_result(result)`` sees each new
    record. ``options`` go to :func:`decompose_sample`.

    Raises :class:`~passnet.errors.DatasetError` before any work when a sample lies
    outside the root or two samples would share a folder, and
    :class:`~passnet.errors.ChildStartError` when no child process can be started.
    """
    folding = (
        Folding.from_json(Path(motifs).read_text()) if isinstance(motifs, (str, Path)) else motifs
    )
    stage = DecomposeStage(
        timeout_s=timeout_s,
        memory_limit_gb=memory_limit_gb,
        kinds=tuple(SubgraphKind.parse(k).value for k in kinds),
        folding=folding,
        options=dict(options),
    )
    return run_stage(
        stage,
        paths,
        out_dir,
        root=root,
        resume=resume,
        retry_failed=retry_failed,
        executor=executor,
        jobs=jobs,
        isolated=isolated,
        progress=progress,
        catalog=catalog,
        on_record=on_result,
    ).records
