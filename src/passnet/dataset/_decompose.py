"""Decomposition of samples into fusible, classical and single-op subgraph samples.

For each kind, candidate op ranges come from:

* ``fusible`` — :mod:`~passnet.dataset._fusible` (one Inductor compilation mapped
  back to FX nodes, or the every-prefix reference): spans of 2..35 operators that
  contain a kernel that fuses (Inductor-generated code, or an extern call that
  replaced several operators, such as attention);
* ``classical`` — :mod:`~passnet.dataset._fold` (recursive folding over a corpus):
  occurrences of folded motifs of 4..62 operators;
* ``single-op`` — every unit (an operator with the ``getitem`` nodes that unpack
  its tuple output; metadata nodes such as ``size()`` are recomputed where used),
  except constant producers, which have no input.

Every candidate is extracted (:mod:`~passnet.dataset._subgraph`), run on the
parent's values at its cut and compared with the parent (it must reproduce them),
written in the GraphNet layout with provenance in ``graph_net.json``, reloaded
and run on replayed inputs. Within one sample and kind, a subgraph whose
canonical hash was already written is a duplicate and is not kept. Every
candidate ends as a :class:`SubgraphRecord` (written / duplicate / skipped /
failed, with the reason).
"""

from __future__ import annotations

import copy
import logging
import shutil
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import torch

from passnet.dataset._fold import Folding, fold_sequences, motif_occurrences
from passnet.dataset._fusible import analyze_fusible, fusible_ranges
from passnet.dataset._generalize import infer_symbolic_dims
from passnet.dataset._lockstep import RangeCheck, run_lockstep
from passnet.dataset._progress import progress_bar
from passnet.dataset._subgraph import (
    OpRange,
    ParentGraph,
    Subgraph,
    SubgraphError,
    canonical_hash,
    extract_subgraph,
    sample_names,
    tensor_meta_from_value,
    trace_parent,
    unit_ranges,
)
from passnet.errors import DatasetError, PassnetError
from passnet.record import ErrorInfo, append_jsonl, read_jsonl
from passnet.sample import Constraints, TensorMeta, find_samples, load_sample, write_sample

__all__ = [
    "DEFAULT_OP_BOUNDS",
    "DecomposeResult",
    "SubgraphKind",
    "SubgraphRecord",
    "SubgraphStatus",
    "decompose_sample",
    "decompose_samples",
    "read_decompose_manifest",
    "write_op_ranges",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MANIFEST = "decompose.jsonl"
FOLDING_FILE = "folding.json"
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


@dataclass
class DecomposeResult:
    """All subgraphs of one sample. ``status`` is ``error`` if the sample or a kind failed."""

    sample: str
    graph_hash: str = ""
    kinds: list[str] = field(default_factory=list)
    status: str = "ok"
    subgraphs: list[SubgraphRecord] = field(default_factory=list)
    errors: list[ErrorInfo] = field(default_factory=list)
    units: int = 0
    compilations: int = 0
    """Inductor compilations spent on fusible analysis."""
    elapsed_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def count(self, kind: str | None = None, status: SubgraphStatus | None = None) -> int:
        return sum(
            1
            for r in self.subgraphs
            if (kind is None or r.kind == kind) and (status is None or r.status == status)
        )

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
        return cls(**{**d, "subgraphs": subs, "errors": errs})


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
    parent: ParentGraph, bounds: tuple[int, int], folding: Folding | None, index: int | None
) -> list[_Candidate]:
    if folding is None or index is None:
        folding, index = fold_sequences([parent.op_sequence], max_ops=bounds[1]), 0
    lo, hi = bounds
    out = []
    for occ in motif_occurrences(folding, index, min_ops=lo, max_ops=hi):
        rng = OpRange(occ.start, occ.stop)
        if not (parent.cut_allowed(rng.start) and parent.cut_allowed(rng.stop)):
            out.append(_Candidate(rng, occ.symbol, skip="a tuple value crosses the range boundary"))
        else:
            out.append(_Candidate(rng, occ.symbol))
    return out


# --- writing --------------------------------------------------------------------------------------


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


def _constraints(sub: Subgraph, symbolic: Mapping[str, list[int | str]]) -> Constraints:
    parent_c = sub.parent.sample.constraints
    shapes: dict[str, list[int | str]] = {}
    for node, name in zip(sub.inputs, sub.input_names, strict=True):
        if node.op == "placeholder" and parent_c is not None and name in parent_c.input_shapes:
            shapes[name] = list(parent_c.input_shapes[name])
        elif node.name in symbolic:
            shapes[name] = list(symbolic[node.name])
    used = sorted(
        {
            s
            for dims in shapes.values()
            for d in dims
            if isinstance(d, str)
            for s in (parent_c.symbols if parent_c else [])
            if s in d
        }
    )
    examples = {
        s: parent_c.example_values[s] for s in used if parent_c and s in parent_c.example_values
    }
    return Constraints(symbols=used, example_values=examples, input_shapes=shapes)


def _provenance(sub: Subgraph, kind: str, symbol: str) -> dict[str, Any]:
    parent = sub.parent
    start, stop = sub.call_range
    return {
        "kind": kind,
        "parent": str(parent.path),
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
        with torch.no_grad():
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


def _materialize(
    parent: ParentGraph,
    kind: SubgraphKind | str,
    candidates: list[_Candidate],
    out: Path,
    symbolic: Mapping[str, list[int | str]],
    catalog: Any,
    result: DecomposeResult,
) -> list[SubgraphRecord]:
    # ``kind``: a decomposition kind, or the label of chosen ranges (write_op_ranges)
    label = kind.value if isinstance(kind, SubgraphKind) else str(kind)
    records: list[SubgraphRecord] = []
    subs: list[tuple[_Candidate, Subgraph]] = []
    for cand in candidates:
        ops = parent.op_sequence[cand.range.start : cand.range.stop]
        rec = SubgraphRecord(
            label,
            cand.range.start,
            cand.range.stop,
            ops,
            SubgraphStatus.SKIPPED,
            symbol=cand.symbol,
            reason=cand.skip,
        )
        if cand.skip:
            records.append(rec)
            continue
        try:
            sub = extract_subgraph(parent, cand.range)
        except SubgraphError as exc:
            rec.status, rec.reason = SubgraphStatus.FAILED, str(exc)
            records.append(rec)
            continue
        if kind is SubgraphKind.SINGLE_OP and not any(
            parent.value_kinds.get(a) == "tensor" for a in sub.inputs
        ):
            rec.reason = "no tensor input (a constant)"
            records.append(rec)
            continue
        subs.append((cand, sub))
    checks, _ = run_lockstep(parent, [s for _, s in subs], feed_forward=False, collect_metas=True)
    by_sub = {id(c.subgraph): c for c in checks}
    if out.exists():
        shutil.rmtree(out)  # a re-run replaces the kind's folder as a whole
    seen: dict[str, str] = {}
    for cand, sub in subs:
        check = by_sub[id(sub)]
        rec = SubgraphRecord(
            label,
            sub.range.start,
            sub.range.stop,
            sub.op_sequence,
            SubgraphStatus.FAILED,
            symbol=cand.symbol,
        )
        records.append(rec)
        if not check.ok:
            rec.reason = f"does not reproduce the parent: {check.reason}"
            continue
        path = out / f"{sub.range.start:04d}-{sub.range.stop:04d}"
        try:
            metas = _input_metas(sub, check)
            rec.graph_hash = canonical_hash(sub.model_source, metas)
            if rec.graph_hash in seen:
                rec.status, rec.duplicate_of = SubgraphStatus.DUPLICATE, seen[rec.graph_hash]
                continue
            graph_net = {k: v for k, v in parent.sample.graph_net.items() if k in _INHERITED_FIELDS}
            graph_net.setdefault("framework", "torch")
            graph_net["dynamic"] = False
            graph_net["subgraph"] = _provenance(sub, label, cand.symbol)
            write_sample(
                path,
                sub.model_source,
                metas,
                constraints=_constraints(sub, symbolic),
                graph_net=graph_net,
                graph_hash=rec.graph_hash,
            )
        except PassnetError as exc:
            rec.reason = f"cannot write: {exc}"
            shutil.rmtree(path, ignore_errors=True)
            continue
        why = _check_replay(path, parent.device, parent.seed, check.outputs_finite)
        if why:
            rec.reason = why
            shutil.rmtree(path, ignore_errors=True)
            continue
        seen[rec.graph_hash] = str(path)
        rec.status, rec.path = SubgraphStatus.WRITTEN, str(path)
        if catalog is not None:
            try:
                catalog.add_subgraph(
                    parent.path,
                    sub.call_range,
                    path,
                    kind=label,
                    provenance=graph_net["subgraph"],
                )
            except PassnetError as exc:
                result.errors.append(_error(exc, "catalog", subgraph=path))
    records.sort(key=lambda r: (r.start, r.stop))
    return records


# --- entry points ---------------------------------------------------------------------------------


def decompose_sample(
    sample: str | Path,
    out_dir: str | Path,
    kinds: Iterable[str | SubgraphKind] = DEFAULT_KINDS,
    *,
    op_bounds: Mapping[str, tuple[int, int]] | None = None,
    method: str = "one-compile",
    folding: Folding | None = None,
    folding_index: int | None = None,
    name: str | None = None,
    device: str = "cpu",
    seed: int = 0,
    catalog: Any = None,
) -> DecomposeResult:
    """Decompose one sample into subgraph samples under ``out_dir/<name>/<kind>/<start>-<stop>/``.

    ``kinds``: any of ``fusible``, ``classical``, ``single-op``. ``op_bounds`` overrides
    the operator-count bounds per kind (:data:`DEFAULT_OP_BOUNDS`). ``method`` is the
    fusible analysis (``one-compile`` or ``every-prefix``). ``folding`` /
    ``folding_index``: a corpus folding and this sample's sequence in it (default:
    fold this sample alone). ``name`` defaults to the sample's folder name.
    ``catalog``: a :class:`~passnet.dataset.Catalog` to record each written subgraph in.

    Never raises for bad input: a sample that cannot be traced or run, or a kind
    that fails (e.g. Inductor cannot compile the graph), is an ``ErrorInfo`` in the
    result, whose status is then ``error``; other kinds still run.
    """
    t0 = time.perf_counter()
    kind_list = [SubgraphKind.parse(k) for k in kinds]
    bounds = dict(DEFAULT_OP_BOUNDS)
    for k, b in (op_bounds or {}).items():
        bounds[SubgraphKind.parse(k)] = (int(b[0]), int(b[1]))
    result = DecomposeResult(
        sample=str(sample),
        kinds=[k.value for k in kind_list],
        options={
            "method": method,
            "device": device,
            "seed": seed,
            "op_bounds": {k.value: list(bounds[k]) for k in kind_list},
        },
    )
    try:
        parent = trace_parent(sample, device, seed)
    except Exception as exc:  # noqa: BLE001 - a broken sample is a result, not a crash
        result.status = "error"
        result.errors.append(_error(exc, "trace", sample=sample))
        result.elapsed_s = time.perf_counter() - t0
        return result
    result.graph_hash = parent.sample.graph_hash
    result.units = len(parent.units)
    try:
        symbolic = infer_symbolic_dims(parent, seed)
    except Exception as exc:  # noqa: BLE001 - symbolic dims are a bonus; static shapes still work
        log.info("no symbolic dims for %s: %s", parent.path, exc)
        symbolic = {}
    out_root = Path(out_dir) / (name or parent.sample.name)
    for kind in kind_list:
        try:
            if kind is SubgraphKind.FUSIBLE:
                candidates = _fusible_candidates(parent, bounds[kind], method, result)
            elif kind is SubgraphKind.CLASSICAL:
                candidates = _classical_candidates(parent, bounds[kind], folding, folding_index)
            else:
                candidates = _single_op_candidates(parent)
            result.subgraphs += _materialize(
                parent, kind, candidates, out_root / kind.value, symbolic, catalog, result
            )
        except Exception as exc:  # noqa: BLE001 - one kind failing must not lose the others
            result.errors.append(_error(exc, kind.value, sample=parent.path))
    if result.errors:
        result.status = "error"
    result.elapsed_s = time.perf_counter() - t0
    return result


def write_op_ranges(
    parent: ParentGraph,
    ranges: Sequence[OpRange],
    out_dir: str | Path,
    *,
    kind: str,
    catalog: Any = None,
) -> list[SubgraphRecord]:
    """Write chosen op ranges of a traced sample as subgraph samples, ``out_dir/<start>-<stop>/``.

    The ranges go through what :func:`decompose_sample` does with its candidates:
    each is extracted, run on the parent's values at its cut and compared with
    them, written with provenance (``graph_net.json`` ``subgraph.kind`` is
    ``kind``), reloaded and run on replayed inputs; one whose canonical hash was
    already written is a duplicate. A range that starts or stops where a
    non-tensor value crosses is skipped. Every range ends as a record, in range
    order, whose status and reason say what became of it. ``out_dir`` is
    replaced as a whole.
    """
    candidates = [
        _Candidate(r)
        if parent.cut_allowed(r.start) and parent.cut_allowed(r.stop)
        else _Candidate(r, skip="a non-tensor value crosses the range boundary")
        for r in ranges
    ]
    result = DecomposeResult(sample=str(parent.path), kinds=[kind])
    records = _materialize(parent, kind, candidates, Path(out_dir), {}, catalog, result)
    for error in result.errors:
        log.warning("%s: %s", parent.path, error.message)
    return records


def read_decompose_manifest(path: str | Path) -> list[DecomposeResult]:
    """Read a ``decompose.jsonl`` written by :func:`decompose_samples` (a torn last line is
    skipped with a warning; any other bad line is an ``InputFormatError`` with file and line)."""
    return read_jsonl(
        path, DecomposeResult.from_dict, what="a decompose result", errors=(DatasetError,)
    )


def decompose_samples(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    kinds: Iterable[str | SubgraphKind] = DEFAULT_KINDS,
    *,
    resume: bool = True,
    progress: bool = False,
    catalog: Any = None,
    **options: Any,
) -> list[DecomposeResult]:
    """Decompose many samples; classical motifs are folded over all of them together.

    Results are appended to ``out_dir/decompose.jsonl`` as each sample finishes;
    with ``resume`` a sample already recorded there (same path, hash and kinds) is
    not done again. ``options`` go to :func:`decompose_sample`.
    """

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kind_list = [SubgraphKind.parse(k) for k in kinds]
    samples = find_samples(paths)
    names = sample_names(samples)
    manifest = out / MANIFEST
    done: dict[tuple[str, str], DecomposeResult] = {}
    if resume and manifest.is_file():
        for r in read_decompose_manifest(manifest):
            done[(r.sample, ",".join(r.kinds))] = r
    kinds_key = ",".join(k.value for k in kind_list)
    folding, index_of = None, {}
    if SubgraphKind.CLASSICAL in kind_list:
        folding, index_of = _fold_corpus(samples, out, options)
    results = []
    with progress_bar("decompose", progress) as bar:
        task = bar.add_task("", total=len(samples))
        for path, name in zip(samples, names, strict=True):
            bar.update(task, description=name)
            previous = done.get((str(path), kinds_key))
            if previous is not None and previous.graph_hash == _hash_or_empty(path):
                results.append(previous)
                bar.advance(task)
                continue
            result = decompose_sample(
                path,
                out,
                kind_list,
                folding=folding,
                folding_index=index_of.get(path),
                name=name,
                catalog=catalog,
                **options,
            )
            append_jsonl(manifest, result.to_dict())
            results.append(result)
            bar.advance(task)
    return results


def _hash_or_empty(path: Path) -> str:
    try:
        return load_sample(path).graph_hash
    except PassnetError:
        return ""


def _fold_corpus(
    samples: Sequence[Path], out: Path, options: Mapping[str, Any]
) -> tuple[Folding, dict[Path, int]]:
    """Fold the op sequences of every traceable sample; write ``folding.json``."""
    bounds = dict(DEFAULT_OP_BOUNDS)
    for k, b in (options.get("op_bounds") or {}).items():
        bounds[SubgraphKind.parse(k)] = tuple(b)
    sequences, ids, index_of = [], [], {}
    for path in samples:
        try:
            parent = trace_parent(path, options.get("device", "cpu"), options.get("seed", 0))
        except Exception as exc:  # noqa: BLE001 - reported again, per sample, by decompose_sample
            log.info("not folded (cannot trace) %s: %s", path, exc)
            continue
        index_of[path] = len(sequences)
        sequences.append(parent.op_sequence)
        ids.append(str(path))
    folding = fold_sequences(sequences, max_ops=bounds[SubgraphKind.CLASSICAL][1], sequence_ids=ids)
    (out / FOLDING_FILE).write_text(folding.to_json() + "\n")
    return folding, index_of
