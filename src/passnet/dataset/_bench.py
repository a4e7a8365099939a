"""PassBench-GN task assembly: bucket subgraphs, sample, aggregate into tasks, split by kind.

Following PassNet appendix B, with PassBench's split layout:

1. **Bucketing.** Each subgraph gets three keys: its exact operator sequence (from
   its ``graph_net.json`` provenance, so dtype variants keep their origin's
   sequence; traced otherwise), its input shape bucket — ``⌊log2(d)/4⌋`` for every
   dimension d of every input (0 for d ≤ 1) — and its dtype (:func:`graph_dtype`: the
   dtype variant it declares, else the floating dtype holding most of its input
   bytes, 0-dim scalars aside). Subgraphs with the same canonical graph hash are one;
   a graph without tensor inputs (``arange(n) + 0.5``: a constant, nothing for a pass
   to rewrite at run time) is left out, with the reason, in ``skipped``.
2. **Stratified sampling.** Within one operator sequence, subgraphs are sorted by
   (shape bucket, dtype, hash) and every σ-th is kept, from a seeded offset.
3. **Aggregation.** One task per operator sequence, holding one representative
   per (shape bucket, dtype): cross-shape and cross-dtype in one task, at most
   ``max_graphs_per_task`` graphs (smallest shape buckets first, float32 first).
4. **Kind.** A task of one operator is a ``single-op`` task. Any other task takes the
   first of ``fusible``, ``classical``, ``graph`` among its graphs' kinds: an operator
   sequence cut both as a fusible and as a classical subgraph is one fusible task (the
   scarcer kind: fusible sequences are the fewer, and what a fusing pass is for).
5. **Split.** Operator sequences, not subgraphs, are split, per kind: ``eval-<kind>``
   and ``train-<kind>`` (``fusible``, ``classical``, ``graph``); single-op tasks all go
   to ``single-op``, neither evaluation nor training of the main kinds. Without
   measurements a seeded shuffle puts ``eval_fraction`` of each kind's sequences in
   evaluation. With Inductor measurements the **long-tail rule** below chooses
   ``eval_tasks`` per kind. Either way no operator sequence is in both a train and an
   eval split (checked; a violation raises).

Long-tail selection (rule ``long-tail-v1``)
-------------------------------------------
PassNet chose its evaluation tasks where TorchInductor is weak (43 % of real
subgraphs slow down under it), so a benchmark of passes measures what a pass can add
beyond the default compiler. Here the rule is explicit and reproducible from the
records:

- **Category.** Each candidate task (kinds other than single-op) takes a category from
  the Inductor record (``passnet eval --compiler inductor``) of its *representative*,
  its first graph, matched by graph hash: ``wrong`` (Inductor failed to compile or run
  it, or its outputs are not allclose at the scoring baseline t = -5, as
  :meth:`passnet.score.GraphOutcome.correct_at` decides), ``slow`` (correct, speedup
  < 1.0), ``marginal`` (1.0 ≤ speedup < 1.2), ``fast`` (≥ 1.2) and ``unmeasured``: no
  record, a ``sample_error`` (eager or loading failed: nothing about Inductor) or
  ``too_large`` record, or a correct run without a usable speedup. A record whose
  timing is flagged (CPU contention, unstable) still counts with its speedup: the
  thresholds are coarse and the flag is in the record. Speedups are e2e, as scored.
- **Rank.** (category in the order above, speedup ascending, a digest of the seed and
  the operator sequence): the weakest first; the digest only breaks ties.
- **Only measured tasks evaluate.** An ``unmeasured`` task trains: nothing says
  Inductor is weak there. A task is judged by the first of its graphs (in task order)
  with a record, else by the first graph of its op sequence with one (the cap on a
  task's graphs may leave the measured one out), so variants added after the
  measurement do not hide it.
- **Families.** A task's family is the first path component of its first graph's
  parent sample relative to the corpus (``timm``, ``transformers-auto-model``), so the
  evaluation split is spread over sources instead of following whichever family has
  most slow graphs.
- **Quotas per kind.** ``eval_tasks`` (N) are shared among the families in proportion
  to their measured candidate counts with a floor of one: a family whose proportional share is
  below one gets one and the rest is shared again among the others, until every share
  is at least one; the shares are then rounded by largest remainder (ties by family
  name). A share never exceeds the family's candidates (shares are proportional to
  them, and N is below their total). Fewer candidates than N
  make them all eval, with a warning; more families than N give one each to the N
  families with most candidates (ties by name). Each family's top-ranked tasks are its
  eval tasks; the rest of the kind trains.

The categories, speedups and families of the chosen tasks are in their ``task.json``
metadata and the manifest, with a summary per kind, family and category; the
measurement files' SHA-256 are in the manifest's ``build`` section. The build is a
function of the input subgraphs, the records, the seed and the options alone.

Provenance is relative: a graph's ``source`` is its path relative to ``root``, its
``parent`` the name its parent sample has in the ``decompose.jsonl`` above it (its path
relative to the corpus; else its place in that folder, else the relative name its
``graph_net.json`` gives) and its ``range`` the cut ``[start, stop]``. Each copied
graph's ``graph_net.json`` is written with the same names (``subgraph.parent``: its
``parent``; ``generalization.parent``: the ``source`` of the graph a variant was made
from), whatever the input held. The tree written does not depend on the absolute folders
it was built from.

Each task is written by :func:`passnet.task.write_task` (the one task writer), and
``manifest.json`` (:func:`write_bench_manifest`) records the build, every task's
provenance and the SHA-256 of every file, so a copy can be verified.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from passnet.dataset._bench_ship import MANIFEST_FILE, file_sha256
from passnet.dataset._catalog import sample_kind, sample_provenance
from passnet.dataset._layout import resolve_root, sample_names
from passnet.dataset._stage import ChildDeath, SampleJob, Send, Stage, run_stage
from passnet.dataset._subgraph import trace_parent
from passnet.errors import DatasetError, PassnetError
from passnet.sample import (
    GRAPH_NET_FILE,
    Sample,
    dtype_to_str,
    find_samples,
    load_sample,
    write_graph_net,
)
from passnet.task import TaskGraph, write_task

__all__ = [
    "LONG_TAIL_CATEGORIES",
    "MANIFEST_FILE",
    "SELECTION_RULE",
    "BenchCandidate",
    "BenchCandidateStage",
    "BenchGraph",
    "BenchResult",
    "BenchTask",
    "TaskSelection",
    "allocate_quotas",
    "build_bench",
    "graph_dtype",
    "shape_bucket",
    "write_bench_manifest",
    "write_candidate_list",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""Of ``manifest.json`` (a task's own ``task.json`` follows :data:`passnet.task.TASK_SCHEMA_VERSION`).
Version 2: splits by kind (``eval-fusible`` ...), relative provenance, file hashes."""
BENCH_NAME = "passbench-gn"
SELECTION_RULE = "long-tail-v1"
LONG_TAIL_CATEGORIES = ("wrong", "slow", "marginal", "fast", "unmeasured")
"""Long-tail categories, weakest Inductor result first (the selection's rank order)."""
SLOW_BELOW = 1.0
FAST_FROM = 1.2
SINGLE_OP = "single-op"
_KIND_ORDER = ("fusible", "classical", "graph")
"""Which kind a multi-operator sequence seen with several kinds is filed under: the first."""
UNKNOWN_FAMILY = "(unknown)"
_DTYPE_ORDER = {"float32": 0, "float16": 1, "bfloat16": 2}
_DECOMPOSE_RECORDS = "decompose.jsonl"


def shape_bucket(shapes: Iterable[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    """``⌊log2(d)/4⌋`` for each dimension of each input (0 for d ≤ 1)."""
    return tuple(
        tuple(0 if d <= 1 else math.floor(math.log2(d) / 4) for d in shape) for shape in shapes
    )


def split_name(split: str, kind: str) -> str:
    """The folder of a task: ``eval-<kind>``, ``train-<kind>`` or ``single-op``."""
    return SINGLE_OP if kind == SINGLE_OP else f"{split}-{kind}"


@dataclass(frozen=True)
class BenchGraph:
    """One input subgraph with its bucket keys and provenance."""

    path: str
    op_sequence: tuple[str, ...]
    shape_bucket: tuple[tuple[int, ...], ...]
    dtype: str
    graph_hash: str
    kind: str
    parent_hash: str = ""
    """Graph hash of the sample it was cut from ("" for a whole graph)."""
    unit_range: tuple[int, ...] = ()
    variant_of: str = ""
    """Graph hash of the graph it is a dtype/shape variant of ("" if none)."""
    parent_ref: str = ""
    """Its parent as its ``graph_net.json`` ``subgraph.parent`` names it, when that is a
    relative name (decompose's name for it, relative to its ``--root``); "" otherwise."""

    def sort_key(self) -> tuple[Any, ...]:
        return (
            self.shape_bucket,
            _DTYPE_ORDER.get(self.dtype, 9),
            self.dtype,
            self.graph_hash,
            self.path,
        )


@dataclass(frozen=True)
class TaskSelection:
    """Why the long-tail rule put a task in evaluation: its representative's Inductor
    category and speedup, its family, and its rank within the family (0 first)."""

    category: str
    speedup: float | None
    family: str
    rank: int
    graph_hash: str
    status: str | None
    """The Inductor record's status (None without a record)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchTask:
    """One task: an operator sequence and its graphs (``task.json``'s graph records; paths
    relative to the task folder, sources relative to the input root)."""

    name: str
    split: str
    """The folder it is written to: ``eval-fusible``, ``train-classical``, ``single-op``..."""
    kind: str
    op_sequence: list[str]
    graphs: list[dict[str, Any]] = field(default_factory=list)
    family: str = UNKNOWN_FAMILY
    selection: TaskSelection | None = None
    measured_hashes: list[str] = field(default_factory=list, repr=False)
    """Graph hashes of every input graph of the op sequence, in the build's sorted order
    (the task's own graphs are a capped subset): what a measurement is matched against."""
    source_paths: list[str] = field(default_factory=list, repr=False)
    """The input sample folders the graphs were copied from (this machine's paths: not
    written to the benchmark)."""
    parents: list[dict[str, str | None]] = field(default_factory=list, repr=False)
    """Per graph, the ``parent`` its copied ``graph_net.json`` holds under ``subgraph``
    and ``generalization`` (:func:`_relative_parents`)."""

    def record(self) -> dict[str, Any]:
        """The task's entry in ``manifest.json``."""
        return {
            "name": self.name,
            "split": self.split,
            "kind": self.kind,
            "op_sequence": list(self.op_sequence),
            "family": self.family,
            "selection": self.selection.to_dict() if self.selection else None,
            "graphs": [dict(g) for g in self.graphs],
        }


@dataclass
class BenchResult:
    """What ``build_bench`` wrote (also ``manifest.json``)."""

    out_dir: str
    seed: int
    stride: int
    eval_fraction: float | None
    max_graphs_per_task: int
    eval_tasks: int = 200
    version: str = "0"
    measurements_sha256: list[str] | None = None
    """SHA-256 of each measurement file, in the order given; None without measurements."""
    tasks: list[BenchTask] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    selection_summary: dict[str, Any] | None = None
    """Per kind: candidates, eval tasks, the family quotas and the counts per family and
    category (candidates and chosen); None without measurements."""
    warnings: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def split(self, name: str) -> list[BenchTask]:
        """The tasks of one split folder (``eval-fusible``, ``single-op``, ...)."""
        return [t for t in self.tasks if t.split == name]

    def split_names(self) -> list[str]:
        """The split folders of the benchmark: eval and train of fusible and classical and
        ``single-op`` always, ``eval-graph``/``train-graph`` (or another kind's) when it
        has tasks."""
        names = {split_name(s, k) for s in ("eval", "train") for k in _KIND_ORDER[:2]}
        names |= {SINGLE_OP} | {t.split for t in self.tasks}
        return sorted(names)

    def sources(self) -> list[str]:
        """The sample folders the tasks' graphs were copied from, each once, in task order:
        what is worth generalizing. A variant of one of them lands in its task (same
        operator sequence); a variant of a subgraph no task took would mostly repeat a
        (shape bucket, dtype) its task already has. So ``generalize`` of these, then
        ``bench build`` of the subgraphs and the variants, gives tasks with both."""
        return list(dict.fromkeys(s for t in self.tasks for s in t.source_paths))

    def representatives(self) -> list[Path]:
        """Each task's first graph (smallest shape bucket, float32 first) in the benchmark
        folder, for every task but the single-op ones: what the long-tail rule measures.

        In measurement order (:func:`_seeded_order`, the kinds interleaved): a measurement
        stopped part-way, or one that can afford only a prefix, has measured a seeded
        random draw of every kind."""
        out = Path(self.out_dir)
        with_graphs = [t for t in self.tasks if t.kind != SINGLE_OP and t.graphs]
        per_kind = [
            _seeded_order([t for t in with_graphs if t.kind == kind], self.seed, kind)
            for kind in _kinds_in_order({t.kind for t in with_graphs})
        ]
        interleaved = [
            t for column in itertools.zip_longest(*per_kind) for t in column if t is not None
        ]
        return [out / t.split / t.name / t.graphs[0]["path"] for t in interleaved]

    def manifest(self) -> dict[str, Any]:
        """``manifest.json`` less its ``files`` (:func:`write_bench_manifest` adds them)."""
        import torch

        import passnet

        selection = None
        if self.measurements_sha256 is not None:
            selection = {
                "rule": SELECTION_RULE,
                "measurements_sha256": list(self.measurements_sha256),
                "categories": list(LONG_TAIL_CATEGORIES),
                "slow_below": SLOW_BELOW,
                "fast_from": FAST_FROM,
                "speedup": "e2e",
                "compiler": "inductor",
            }
        out = Path(self.out_dir)
        splits = {}
        for name in self.split_names():
            tasks = self.split(name)
            folder = out / name
            splits[name] = {
                "tasks": len(tasks),
                "graphs": sum(len(t.graphs) for t in tasks),
                "bytes": sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
                if folder.is_dir()
                else 0,
            }
        return {
            "schema_version": self.schema_version,
            "name": BENCH_NAME,
            "version": self.version,
            "build": {
                "seed": self.seed,
                "stride": self.stride,
                "max_graphs_per_task": self.max_graphs_per_task,
                "eval_tasks": self.eval_tasks,
                "eval_fraction": self.eval_fraction,
                "selection": selection,
                "torch": torch.__version__,
                "passnet": passnet.__version__,
            },
            "splits": splits,
            "tasks": [t.record() for t in self.tasks],
            "selection_summary": self.selection_summary,
            "skipped": [dict(s) for s in self.skipped],
        }


def write_bench_manifest(out_dir: str | Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``out_dir/manifest.json``: ``manifest`` (without ``files``) plus ``files``, the
    SHA-256 of every file under ``out_dir`` but the manifest itself, by POSIX path relative
    to ``out_dir``, sorted. Indent 2, sorted keys, no timestamps: the same tree gives the
    same bytes. Returns the manifest's path."""
    out = Path(out_dir)
    target = out / MANIFEST_FILE
    files = {
        p.relative_to(out).as_posix(): file_sha256(p)
        for p in sorted(out.rglob("*"))
        if p.is_file() and p != target
    }
    document = {**dict(manifest), "files": dict(sorted(files.items()))}
    target.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return target


def _op_sequence(sample: Sample) -> tuple[str, ...]:
    provenance = sample.graph_net.get("subgraph")
    if isinstance(provenance, dict) and isinstance(provenance.get("op_sequence"), list):
        return tuple(str(op) for op in provenance["op_sequence"])
    return tuple(trace_parent(sample).op_sequence)


def _short_dtype(dtype: Any) -> str:
    return dtype_to_str(dtype).removeprefix("torch.")


def graph_dtype(sample: Sample) -> str | None:
    """The dtype a graph is filed under (``float16``, ``float32``, ...); None without
    tensor inputs.

    A dtype variant says what it is: ``graph_net.json`` ``generalization.dtype``
    (``passnet generalize``) or ``dtype_generalization.dtype`` (``cast_sample``). Other
    graphs take the floating dtype that holds most of their input bytes, 0-dim scalars
    aside: a float16 batch norm keeps float32 running statistics and a float64 momentum,
    and is still a float16 graph. A graph without floating inputs takes its integer dtype
    the same way.
    """
    for key in ("generalization", "dtype_generalization"):
        declared = sample.graph_net.get(key)
        if isinstance(declared, dict) and declared.get("dtype"):
            return str(declared["dtype"]).removeprefix("torch.")
    tensors = [sample.metas[n] for n in sample.param_names if not sample.is_symint(n)]
    if not tensors:
        return None
    for pool in (
        [m for m in tensors if m.dtype.is_floating_point and m.shape],
        [m for m in tensors if m.dtype.is_floating_point],
        [m for m in tensors if m.shape],
        tensors,
    ):
        if pool:
            weight: dict[str, int] = {}
            for m in pool:
                key = _short_dtype(m.dtype)
                weight[key] = weight.get(key, 0) + max(m.numel, 1) * m.dtype.itemsize
            # most bytes first; ties by name, so the choice never depends on input order
            return min(weight, key=lambda k: (-weight[k], k))
    return None


class _NoInputs(Exception):
    """A graph without tensor inputs (left out of the benchmark)."""


CANDIDATE_SCHEMA_VERSION = 3
"""Version 2: ``parent_hash``, ``unit_range`` and ``variant_of`` (provenance); 3:
``parent_ref``."""


@dataclass
class BenchCandidate:
    """The candidate step's record of one input sample: its bucket keys
    (:class:`BenchGraph`), or why it is left out (``status`` ``skipped``, ``reason``)."""

    sample: str
    status: str = "ok"
    reason: str = ""
    op_sequence: list[str] = field(default_factory=list)
    shape_bucket: list[list[int]] = field(default_factory=list)
    dtype: str = ""
    kind: str = ""
    graph_hash: str = ""
    parent_hash: str = ""
    unit_range: list[int] = field(default_factory=list)
    variant_of: str = ""
    parent_ref: str = ""
    name: str = ""
    root: str = ""
    fingerprint: str = ""
    elapsed_s: float = 0.0
    schema_version: int = CANDIDATE_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchCandidate:
        if d.get("schema_version", 1) > CANDIDATE_SCHEMA_VERSION:
            raise DatasetError(
                f"bench candidate schema {d['schema_version']} is newer than "
                f"{CANDIDATE_SCHEMA_VERSION}"
            )
        return cls(**d)

    def graph(self) -> BenchGraph:
        return BenchGraph(
            self.sample,
            tuple(self.op_sequence),
            tuple(tuple(b) for b in self.shape_bucket),
            self.dtype,
            self.graph_hash,
            self.kind,
            self.parent_hash,
            tuple(self.unit_range),
            self.variant_of,
            self.parent_ref,
        )


@dataclass(frozen=True)
class BenchCandidateStage(Stage[BenchCandidate]):
    """The candidate step of ``bench build`` as a dataset stage: read one sample's bucket
    keys (it writes no files; the records stay in memory)."""

    verb: ClassVar[str] = "bench"
    records_file: ClassVar[str] = "bench_candidates.jsonl"

    def record(self, data: dict[str, Any]) -> BenchCandidate:
        return BenchCandidate.from_dict(data)

    def work(self, job: SampleJob, send: Send) -> BenchCandidate:
        t0 = time.perf_counter()
        try:
            g = _describe(Path(job.sample))
        except _NoInputs as exc:
            return BenchCandidate(job.sample, "skipped", str(exc))
        except (PassnetError, RuntimeError, ValueError, KeyError) as exc:
            log.info("bench: skipping %s: %s", job.sample, exc)
            return BenchCandidate(job.sample, "skipped", str(exc))
        return BenchCandidate(
            job.sample,
            op_sequence=list(g.op_sequence),
            shape_bucket=[list(b) for b in g.shape_bucket],
            dtype=g.dtype,
            kind=g.kind,
            graph_hash=g.graph_hash,
            parent_hash=g.parent_hash,
            unit_range=list(g.unit_range),
            variant_of=g.variant_of,
            parent_ref=g.parent_ref,
            elapsed_s=time.perf_counter() - t0,
        )

    def failed(
        self, job: SampleJob, death: ChildDeath, provisional: BenchCandidate | None
    ) -> BenchCandidate:
        return BenchCandidate(job.sample, "skipped", f"{death.kind}: {death.message}")


def _describe(path: Path) -> BenchGraph:
    sample = load_sample(path)
    tensors = [sample.metas[n] for n in sample.param_names if not sample.is_symint(n)]
    dtype = graph_dtype(sample)
    if dtype is None:
        raise _NoInputs(
            "no tensor inputs: a constant computation (nothing for a pass to rewrite at run time)"
        )
    provenance = sample.graph_net.get("subgraph")
    cut = provenance if isinstance(provenance, dict) else {}
    variant = sample.graph_net.get("generalization")
    unit_range = cut.get("unit_range")
    parent = cut.get("parent")
    return BenchGraph(
        str(path),
        _op_sequence(sample),
        shape_bucket(m.shape for m in tensors),
        dtype,
        sample.graph_hash,
        str(cut.get("kind", "graph")),
        str(cut.get("parent_graph_hash", "")),
        tuple(int(i) for i in unit_range) if isinstance(unit_range, list) else (),
        str(variant.get("parent_graph_hash", "")) if isinstance(variant, dict) else "",
        parent if isinstance(parent, str) and not PurePosixPath(parent).is_absolute() else "",
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _task_name(ops: Sequence[str]) -> str:
    short = "_".join(op.rsplit(".", 1)[-1].strip("_") for op in ops)
    short = "".join(c if c.isalnum() or c in "_-" else "-" for c in short)
    if len(short) > 48:
        short = short[:48].rstrip("_-") + f"_{len(ops)}ops"
    return f"{short}-{_digest(chr(10).join(ops))[:10]}"


def _bucket_dir(bucket: tuple[tuple[int, ...], ...]) -> str:
    text = "_".join("x".join(str(d) for d in dims) or "s" for dims in bucket) or "none"
    return text if len(text) <= 48 else f"b{_digest(repr(bucket))[:12]}"


def _sample(members: list[BenchGraph], stride: int, seed: int, key: str) -> list[BenchGraph]:
    offset = random.Random(f"{seed}:{key}").randrange(stride)
    return members[offset::stride]


def _kinds_in_order(kinds: Iterable[str]) -> list[str]:
    """Fusible, classical, graph (those present), then other labels by name."""
    present = set(kinds)
    return [k for k in _KIND_ORDER if k in present] + sorted(present - set(_KIND_ORDER))


def _task_kind(seq: Sequence[str], kinds: Iterable[str]) -> str:
    """A one-operator sequence is single-op; otherwise the first of fusible, classical,
    graph among the kinds it was seen with (another label after those, by name)."""
    if len(seq) == 1:
        return SINGLE_OP
    present = set(kinds) - {SINGLE_OP}
    order = _kinds_in_order(present)
    return order[0] if order else SINGLE_OP


@dataclass
class _ParentNames:
    """Where a subgraph's parent is named: the ``decompose.jsonl`` records found in the
    folders above the samples (parent graph hash -> name, the parent's path relative to
    the corpus; a hash named twice takes the first name in sorted order) and the folders
    holding them (decompose writes ``<folder>/<name>/<kind>/<start>-<stop>/``)."""

    by_hash: dict[str, str]
    folders: list[Path]

    @classmethod
    def find(cls, paths: Iterable[str]) -> _ParentNames:
        from passnet.dataset._decompose import read_decompose_manifest

        checked: set[Path] = set()
        found: list[Path] = []
        for raw in paths:
            for folder in Path(raw).resolve().parents:
                if folder in checked:
                    break  # its own parents were checked with it
                checked.add(folder)
                if (folder / _DECOMPOSE_RECORDS).is_file():
                    found.append(folder)
        names: dict[str, set[str]] = {}
        for folder in sorted(found):
            for result in read_decompose_manifest(folder / _DECOMPOSE_RECORDS):
                if result.graph_hash and result.name:
                    names.setdefault(result.graph_hash, set()).add(result.name)
        return cls({h: min(n) for h, n in names.items()}, sorted(found))

    def name(self, g: BenchGraph) -> str | None:
        """The parent of a subgraph: by its parent's hash in the records, else by where it
        lies in a decompose output folder (a sample whose record was lost, its subgraphs
        written), else by the relative name its ``graph_net.json`` gives it; None when
        none says."""
        if g.parent_hash in self.by_hash:
            return self.by_hash[g.parent_hash]
        if len(g.unit_range) != 2:
            return g.parent_ref or None
        real = Path(g.path).resolve()
        cut = f"{g.unit_range[0]:04d}-{g.unit_range[1]:04d}"
        for folder in self.folders:
            if folder in real.parents:
                parts = real.relative_to(folder).parts
                if len(parts) >= 3 and parts[-2] == g.kind and parts[-1] == cut:
                    return "/".join(parts[:-2])
        return g.parent_ref or None


def _write_task(task_dir: Path, task: BenchTask) -> None:
    """Write one task with the one task writer; its BenchTask becomes ``task.json``'s metadata."""
    graphs = [
        TaskGraph(g["path"], Path(source), {k: v for k, v in g.items() if k != "path"})
        for g, source in zip(task.graphs, task.source_paths, strict=True)
    ]
    metadata = {
        "builder": "bench",
        "split": task.split,
        "kind": task.kind,
        "op_sequence": task.op_sequence,
        "family": task.family,
        "selection": task.selection.to_dict() if task.selection else None,
    }
    write_task(task_dir, graphs, name=task.name, metadata=metadata)
    for g, parents in zip(task.graphs, task.parents, strict=True):
        _relative_parents(task_dir / g["path"], parents)


def _relative_parents(graph_dir: Path, parents: Mapping[str, str | None]) -> None:
    """Write ``parents`` into a copied graph's ``graph_net.json``: for each section
    (``subgraph``, ``generalization``) that names a ``parent``, the benchmark's relative
    name for it, whatever the input held (an older passnet wrote the absolute path the
    stage was given). A file already holding those names is left as copied."""
    file = graph_dir / GRAPH_NET_FILE
    if not file.is_file():
        return
    graph_net = json.loads(file.read_text(encoding="utf-8"))
    changed = False
    for key, name in parents.items():
        section = graph_net.get(key)
        if isinstance(section, dict) and "parent" in section and section["parent"] != name:
            section["parent"] = name
            changed = True
    if changed:
        write_graph_net(graph_dir, graph_net)


def _record_task(catalog: Any, out: Path, task: BenchTask, seed: int, stride: int) -> None:
    """Record a task and its graphs. A task's graph is a copy of a subgraph or variant: the
    task's samples are those sources, each recorded with its own kind (``fusible``,
    ``variant``, ...), and the copies' paths in the task are in ``extra["graphs"]``."""
    sources = []
    for path in task.source_paths:
        source = Path(path)
        if not catalog.has_sample(source):
            sample = load_sample(source)
            catalog.add_sample(
                source,
                kind=sample_kind(sample),
                provenance=sample_provenance(sample),
                sample=sample,
            )
        sources.append(source)
    catalog.add_task(
        task.name,
        samples=sources,
        path=out / task.split / task.name,
        kind=task.kind,
        split=task.split,
        ops=task.op_sequence,
        dtypes=sorted({g["dtype"] for g in task.graphs}),
        extra={
            "seed": seed,
            "stride": stride,
            "graphs": [
                {"path": g["path"], "source": s}
                for g, s in zip(task.graphs, task.source_paths, strict=True)
            ],
        },
    )


# --------------------------------------------------------------------------- long-tail selection


def allocate_quotas(n: int, counts: Mapping[str, int]) -> dict[str, int]:
    """Share ``n`` eval tasks among families in proportion to their candidate ``counts``
    (module docstring, "Quotas per kind"): every family with a candidate gets at least one
    (the N largest families one each when there are more than N), none more than it has;
    shares are rounded by largest remainder, ties by family name."""
    families = sorted(f for f, c in counts.items() if c > 0)
    total = sum(counts[f] for f in families)
    if n >= total:
        return {f: counts[f] for f in families}
    if n <= 0:
        return {f: 0 for f in families}
    if n < len(families):
        ranked = sorted(families, key=lambda f: (-counts[f], f))
        return {f: int(f in ranked[:n]) for f in families}
    # Raise shares below one to one, and share the rest again among the others. This
    # ends with every active share at least one: the shares left sum to at least the
    # families left (n >= families, each fixed family takes one), so never all are below
    # one. No share exceeds its family's count: shares are proportional to the counts
    # and n < total, and largest remainder adds at most one to a share's floor.
    fixed: dict[str, int] = {}
    while True:
        active = [f for f in families if f not in fixed]
        left = n - len(fixed)
        weight = sum(counts[f] for f in active)
        exact = {f: Fraction(left * counts[f], weight) for f in active}  # exact remainders
        floored = [f for f in active if exact[f] < 1]
        if not floored:
            break
        fixed.update(dict.fromkeys(floored, 1))
    quotas = {f: math.floor(exact[f]) for f in active}
    rest = left - sum(quotas.values())
    for f in sorted(active, key=lambda f: (-(exact[f] - quotas[f]), f))[:rest]:
        quotas[f] += 1
    return {**fixed, **quotas}


@dataclass(frozen=True)
class _Measured:
    category: str
    speedup: float | None
    status: str | None


def _categorize(record: Any) -> _Measured:
    """The long-tail category of one Inductor record (None: unmeasured)."""
    from passnet.record import BASELINE_T
    from passnet.score import GraphOutcome
    from passnet.status import Status

    if record is None:
        return _Measured("unmeasured", None, None)
    status = record.status.value
    if record.status in (Status.SAMPLE_ERROR, Status.TOO_LARGE):
        return _Measured("unmeasured", None, status)
    outcome = GraphOutcome.from_record(record)  # the scorer's reading of the record
    if not outcome.correct_at(BASELINE_T):
        return _Measured("wrong", outcome.speedup, status)
    if outcome.speedup is None:
        return _Measured("unmeasured", None, status)
    s = outcome.speedup
    category = "slow" if s < SLOW_BELOW else "marginal" if s < FAST_FROM else "fast"
    return _Measured(category, s, status)


def _read_measurements(files: Sequence[str | Path]) -> tuple[dict[str, Any], list[str]]:
    """Inductor records by graph hash, and each file's SHA-256. Records of other compilers
    are left aside; records of more than one Inductor configuration (or device) are
    refused, as is a file without any Inductor record."""
    from passnet.score import load_records

    by_hash: dict[str, Any] = {}
    digests: list[str] = []
    configs: dict[tuple[str, str], str] = {}
    for raw in files:
        path = Path(raw)
        records = load_records(path)
        digests.append(file_sha256(path / "results.jsonl" if path.is_dir() else path))
        inductor = [r for r in records if r.compiler == "inductor"]
        if not inductor:
            raise DatasetError(
                "no record of compiler 'inductor' among the measurements (give the records "
                "of `passnet eval LIST --compiler inductor`)",
                file=path,
            )
        if len(inductor) < len(records):
            log.warning(
                "%s: %d record(s) of other compilers left aside", path, len(records) - len(inductor)
            )
        for r in inductor:
            configs.setdefault((r.compiler_config_hash, r.device), str(path))
            if not r.graph_hash:
                continue
            earlier = by_hash.get(r.graph_hash)
            # the same graph measured under two paths: the first path in sorted order
            if earlier is None or r.graph < earlier.graph:
                by_hash[r.graph_hash] = r
    if len(configs) > 1:
        listed = "; ".join(f"config {c[:8]} on {d} ({f})" for (c, d), f in sorted(configs.items()))
        raise DatasetError(
            f"the measurements mix {len(configs)} Inductor configurations or devices: {listed}; "
            "give the records of one"
        )
    return by_hash, digests


def _task_measurement(task: BenchTask, records: Mapping[str, Any]) -> tuple[_Measured, str]:
    """The category of a task from the record of its first graph (in task order) that has
    one, else of the first graph of its op sequence that has one (the task holds at most
    ``max_graphs_per_task`` of them: variants with smaller shapes can push the measured
    graph out), and that graph's hash."""
    hashes = [g["graph_hash"] for g in task.graphs] + task.measured_hashes
    for graph_hash in hashes:
        record = records.get(graph_hash)
        if record is not None:
            return _categorize(record), graph_hash
    return _categorize(None), task.graphs[0]["graph_hash"]


def _select_long_tail(
    tasks: list[BenchTask],
    records: Mapping[str, Any],
    eval_tasks: int,
    seed: int,
    warnings: list[str],
) -> tuple[set[str], dict[str, Any]]:
    """The eval task names of the long-tail rule (selection set on each chosen task) and
    the summary per kind."""
    chosen: set[str] = set()
    summary: dict[str, Any] = {}
    for kind in sorted({t.kind for t in tasks if t.kind != SINGLE_OP}):
        candidates = [t for t in tasks if t.kind == kind]
        measured = {t.name: _task_measurement(t, records) for t in candidates}
        eligible = [t for t in candidates if measured[t.name][0].category != "unmeasured"]
        if len(eligible) < len(candidates):
            warnings.append(
                f"{kind}: {len(candidates) - len(eligible)} of {len(candidates)} candidate "
                "tasks have no usable Inductor record: they train (measure the --candidates "
                "list of this build)"
            )

        ranks = {
            t.name: (
                LONG_TAIL_CATEGORIES.index(measured[t.name][0].category),
                measured[t.name][0].speedup
                if measured[t.name][0].speedup is not None
                else math.inf,
                _digest(f"{seed}\n" + "\n".join(t.op_sequence)),
            )
            for t in candidates
        }
        by_family: dict[str, list[BenchTask]] = {}
        for t in sorted(candidates, key=lambda t: ranks[t.name]):
            by_family.setdefault(t.family, []).append(t)
        quotas = allocate_quotas(
            eval_tasks,
            {
                f: sum(measured[t.name][0].category != "unmeasured" for t in ts)
                for f, ts in by_family.items()
            },
        )
        if len(eligible) <= eval_tasks:
            warnings.append(
                f"{kind}: {len(eligible)} measured candidate task(s), not more than the "
                f"{eval_tasks} asked for: all are evaluation tasks"
            )
        families: dict[str, dict[str, dict[str, int]]] = {}
        for family, members in sorted(by_family.items()):
            counts = families.setdefault(
                family, {c: {"candidates": 0, "eval": 0} for c in LONG_TAIL_CATEGORIES}
            )
            for i, t in enumerate(members):
                m, graph_hash = measured[t.name]
                counts[m.category]["candidates"] += 1
                if i < quotas.get(family, 0) and m.category != "unmeasured":
                    counts[m.category]["eval"] += 1
                    chosen.add(t.name)
                    t.selection = TaskSelection(
                        m.category, m.speedup, family, i, graph_hash, m.status
                    )
        summary[kind] = {
            "candidates": len(candidates),
            "eval": sum(quotas.values()),
            "quotas": dict(sorted(quotas.items())),
            "families": families,
        }
    return chosen, summary


def _seeded_order(tasks: Sequence[BenchTask], seed: int, kind: str) -> list[BenchTask]:
    """``tasks`` (of one kind) sorted by the digest of their operator sequence, then
    shuffled with ``seed`` and the kind: the order of the fraction split and of the
    measurement list."""
    ordered = sorted(tasks, key=lambda t: _digest("\n".join(t.op_sequence)))
    random.Random(f"{seed}:{kind}").shuffle(ordered)
    return ordered


def _split_by_fraction(tasks: list[BenchTask], eval_fraction: float, seed: int) -> set[str]:
    """A seeded shuffle per kind puts ``eval_fraction`` of its sequences in evaluation (at
    least one and not all, when the kind has two or more and the fraction is above 0)."""
    chosen: set[str] = set()
    for kind in sorted({t.kind for t in tasks if t.kind != SINGLE_OP}):
        by_digest = _seeded_order([t for t in tasks if t.kind == kind], seed, kind)
        n_eval = round(len(by_digest) * eval_fraction)
        if eval_fraction > 0 and len(by_digest) >= 2:
            n_eval = min(max(n_eval, 1), len(by_digest) - 1)
        chosen.update(t.name for t in by_digest[:n_eval])
    return chosen


# --------------------------------------------------------------------------- the build


def build_bench(
    paths: str | Path | Iterable[str | Path],
    out_dir: str | Path,
    *,
    seed: int = 0,
    stride: int = 1,
    eval_fraction: float | None = None,
    eval_tasks: int = 200,
    measurements: Sequence[str | Path] = (),
    max_graphs_per_task: int = 16,
    kinds: Sequence[str] | None = None,
    root: str | Path | None = None,
    version: str = "0",
    overwrite: bool = False,
    catalog: Any = None,
    progress: bool = False,
    executor: Any = None,
    jobs: int = 1,
    isolated: bool = False,
    timeout_s: float = 600.0,
) -> BenchResult:
    """Assemble PassBench-GN tasks (module docstring; docs/dataset_decompose.md) from
    subgraph samples into ``out_dir``.

    ``paths``: sample folders, folders searched for samples, or list files. ``stride``
    is σ of the stratified sampling. The split: with ``measurements`` (files or results
    folders of ``passnet eval --compiler inductor`` on the representatives,
    :meth:`BenchResult.representatives`) the long-tail rule chooses ``eval_tasks`` eval
    tasks per kind; without, ``eval_fraction`` (default 0.2) of each kind's operator
    sequences are drawn by the seed. Giving both is a :class:`DatasetError`. ``kinds``
    keeps only subgraphs of those kinds (``fusible``, ``classical``, ``single-op``;
    ``graph`` for whole graphs), as told by their ``graph_net.json``. ``root``: the
    folder graph sources are recorded relative to (default: the common folder of the
    samples' parent folders). ``version``: the benchmark's version in the manifest.
    ``out_dir`` must be absent or empty unless ``overwrite``. Unreadable samples, and
    graphs without tensor inputs, are listed in ``skipped`` with the reason.
    ``catalog``: a :class:`~passnet.dataset.Catalog` to record each task in, with its
    source samples (see :func:`_record_task`).

    The candidate step (each sample's bucket keys) is a dataset stage
    (:class:`BenchCandidateStage`): in this process by default, or with ``isolated``
    each sample in a child (``timeout_s``), on ``executor`` (default: this machine,
    ``jobs`` at once). The tasks do not depend on which.
    """
    if stride < 1:
        raise DatasetError(f"stride must be at least 1, got {stride}")
    if measurements and eval_fraction is not None:
        raise DatasetError(
            "eval_fraction and measurements exclude each other: with measurements the "
            "long-tail rule chooses eval_tasks per kind"
        )
    if eval_fraction is None:
        eval_fraction = None if measurements else 0.2
    if eval_fraction is not None and not 0.0 <= eval_fraction <= 1.0:
        raise DatasetError(f"eval_fraction must be in [0, 1], got {eval_fraction}")
    if eval_tasks < 0:
        raise DatasetError(f"eval_tasks must be 0 or more, got {eval_tasks}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise DatasetError("output folder is not empty (use overwrite)", file=out)
    records, digests = _read_measurements(measurements) if measurements else ({}, None)
    samples = find_samples([paths] if isinstance(paths, (str, Path)) else paths)
    base = resolve_root(samples, root)
    relative = dict(zip(map(str, samples), sample_names(samples, base), strict=True))
    if out.exists() and any(out.iterdir()):
        shutil.rmtree(out)
    wanted = {k.replace("_", "-") for k in kinds} if kinds else None
    result = BenchResult(
        str(out),
        seed,
        stride,
        eval_fraction,
        max_graphs_per_task,
        eval_tasks=eval_tasks,
        version=version,
        measurements_sha256=digests,
    )
    graphs: list[BenchGraph] = []
    candidates = run_stage(
        BenchCandidateStage(timeout_s=timeout_s),
        samples,
        None,
        find=False,
        executor=executor,
        jobs=jobs,
        isolated=isolated,
        progress=progress,
    ).records
    for candidate in candidates:
        if candidate.status != "ok":
            result.skipped.append({"path": relative[candidate.sample], "reason": candidate.reason})
        elif wanted is None or candidate.kind in wanted:
            graphs.append(candidate.graph())

    by_sequence: dict[tuple[str, ...], list[BenchGraph]] = {}
    by_hash: dict[str, BenchGraph] = {}
    for g in sorted(graphs, key=lambda g: (g.op_sequence, *g.sort_key())):
        if g.graph_hash in by_hash:
            continue  # the same graph (from another parent, or listed twice)
        by_hash[g.graph_hash] = g
        by_sequence.setdefault(g.op_sequence, []).append(g)

    sampled = {seq: _sample(by_sequence[seq], stride, seed, "\n".join(seq)) for seq in by_sequence}
    sampled = {
        seq: members for seq, members in sampled.items() if members
    }  # fewer than σ: none kept
    parents = _ParentNames.find(g.path for members in sampled.values() for g in members)

    def parent_of(g: BenchGraph) -> str | None:
        if g.parent_hash:
            name = parents.name(g)
            if name is not None:
                return name
        origin = by_hash.get(g.variant_of) if g.variant_of else None
        if origin is not None and origin is not g:
            return parent_of(origin)  # a variant: its origin's parent
        if g.parent_hash or g.variant_of:
            return None
        return relative[g.path]  # a whole graph is its own parent

    def origin_of(g: BenchGraph) -> str | None:
        """The source of the graph a variant was made from, when that graph is an input
        (matched by hash, as :func:`parent_of` does); else None."""
        origin = by_hash.get(g.variant_of) if g.variant_of else None
        return relative[origin.path] if origin is not None and origin is not g else None

    tasks: list[BenchTask] = []
    for seq in sorted(sampled, key=_task_name):
        representatives: dict[tuple[Any, ...], BenchGraph] = {}
        for g in sampled[seq]:
            representatives.setdefault((g.shape_bucket, g.dtype), g)
        order = sorted(representatives, key=lambda k: (k[0], _DTYPE_ORDER.get(k[1], 9), k[1]))
        chosen = [representatives[k] for k in order][:max_graphs_per_task]
        kind = _task_kind(seq, (g.kind for g in by_sequence[seq]))
        task = BenchTask(_task_name(seq), "", kind, list(seq))
        task.measured_hashes = [g.graph_hash for g in by_sequence[seq]]
        for g in chosen:
            name = f"{Path(g.path).name}_{g.graph_hash[:10]}"
            parent = parent_of(g)
            task.graphs.append(
                {
                    "path": f"graphs/{g.dtype}/{_bucket_dir(g.shape_bucket)}/{name}",
                    "source": relative[g.path],
                    "parent": parent,
                    "range": list(g.unit_range) or None,
                    "kind": g.kind,
                    "dtype": g.dtype,
                    "shape_bucket": [list(b) for b in g.shape_bucket],
                    "graph_hash": g.graph_hash,
                }
            )
            task.source_paths.append(g.path)
            task.parents.append(
                {
                    "subgraph": parent if g.parent_hash else g.parent_ref or None,
                    "generalization": origin_of(g),
                }
            )
        first_parent = task.graphs[0]["parent"]
        task.family = first_parent.split("/", 1)[0] if first_parent else UNKNOWN_FAMILY
        tasks.append(task)
    unknown = sum(1 for t in tasks for g in t.graphs if g["parent"] is None)
    if unknown:
        result.warnings.append(
            f"{unknown} graph(s) have no parent name: no {_DECOMPOSE_RECORDS} above them names "
            f"the sample they were cut from (their tasks' family is {UNKNOWN_FAMILY!r})"
        )

    if measurements:
        eval_names, result.selection_summary = _select_long_tail(
            tasks, records, eval_tasks, seed, result.warnings
        )
    else:
        assert eval_fraction is not None
        eval_names = _split_by_fraction(tasks, eval_fraction, seed)
    for task in tasks:
        task.split = split_name("eval" if task.name in eval_names else "train", task.kind)
    train_ops = {tuple(t.op_sequence) for t in tasks if t.split.startswith("train-")}
    eval_ops = {tuple(t.op_sequence) for t in tasks if t.split.startswith("eval-")}
    if train_ops & eval_ops:  # cannot happen by construction; a leak would void the benchmark
        raise DatasetError("an operator sequence is in both a train and an eval split")
    for message in result.warnings:
        log.info("bench build: %s", message)  # returned in warnings (the CLI prints them)

    out.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        _write_task(out / task.split / task.name, task)
        result.tasks.append(task)
        if catalog is not None:
            try:
                _record_task(catalog, out, task, seed, stride)
            except PassnetError as exc:
                log.warning("catalog: cannot record task %s: %s", task.name, exc)
    write_bench_manifest(out, result.manifest())
    return result


def write_candidate_list(result: BenchResult, path: str | Path) -> Path:
    """Write the representatives (:meth:`BenchResult.representatives`) to a list file that
    ``passnet eval LIST`` reads, one per line, relative to the list file's folder (a list
    file's relative lines are read so): the list and the benchmark move together."""
    target = Path(path)
    folder = target.parent.resolve()
    lines = [
        Path(os.path.relpath(p.resolve(), folder)).as_posix() for p in result.representatives()
    ]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(f"{line}\n" for line in lines))
    return target
