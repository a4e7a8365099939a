"""PassBench-style task assembly: bucket subgraphs, sample, aggregate into tasks, split.

Following PassNet appendix B:

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
   ``max_graphs_per_task`` graphs (smallest shape buckets first).
4. **Split.** Operator sequences, not subgraphs, are split: a seeded shuffle puts
   ``eval_fraction`` of them in ``eval``, the rest in ``train``, so no operator
   sequence is in both.

Each task is written by :func:`passnet.task.write_task` (the one task writer):
its ``task.json`` metadata holds ``builder: "bench"``, the ``split``, ``kind`` and
``op_sequence``, and each graph's record its ``source``, ``dtype``,
``shape_bucket`` and ``graph_hash``.

The output is a pure function of the input files and the options: the same
subgraphs and seed give a byte-identical tree (no timestamps, sorted orders,
files copied byte for byte).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from passnet.dataset._catalog import sample_kind, sample_provenance
from passnet.dataset._stage import ChildDeath, SampleJob, Send, Stage, run_stage
from passnet.dataset._subgraph import trace_parent
from passnet.errors import DatasetError, PassnetError
from passnet.sample import Sample, dtype_to_str, find_samples, load_sample
from passnet.task import TaskGraph, write_task

__all__ = [
    "BenchCandidate",
    "BenchCandidateStage",
    "BenchGraph",
    "BenchResult",
    "BenchTask",
    "build_bench",
    "graph_dtype",
    "shape_bucket",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""Of ``manifest.json`` (a task's own ``task.json`` follows :data:`passnet.task.TASK_SCHEMA_VERSION`)."""
_DTYPE_ORDER = {"float32": 0, "float16": 1, "bfloat16": 2}


def shape_bucket(shapes: Iterable[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    """``⌊log2(d)/4⌋`` for each dimension of each input (0 for d ≤ 1)."""
    return tuple(
        tuple(0 if d <= 1 else math.floor(math.log2(d) / 4) for d in shape) for shape in shapes
    )


@dataclass(frozen=True)
class BenchGraph:
    """One input subgraph with its bucket keys."""

    path: str
    op_sequence: tuple[str, ...]
    shape_bucket: tuple[tuple[int, ...], ...]
    dtype: str
    graph_hash: str
    kind: str

    def sort_key(self) -> tuple[Any, ...]:
        return (
            self.shape_bucket,
            _DTYPE_ORDER.get(self.dtype, 9),
            self.dtype,
            self.graph_hash,
            self.path,
        )


@dataclass
class BenchTask:
    """One task: an operator sequence and its graphs (paths relative to the task folder)."""

    name: str
    split: str
    kind: str
    op_sequence: list[str]
    graphs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BenchResult:
    """What ``build_bench`` wrote (also ``manifest.json``)."""

    out_dir: str
    seed: int
    stride: int
    eval_fraction: float
    max_graphs_per_task: int
    tasks: list[BenchTask] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def split(self, name: str) -> list[BenchTask]:
        return [t for t in self.tasks if t.split == name]

    def sources(self) -> list[str]:
        """The sample folders the tasks' graphs were copied from, each once, in task order:
        what is worth generalizing. A variant of one of them lands in its task (same
        operator sequence); a variant of a subgraph no task took would mostly repeat a
        (shape bucket, dtype) its task already has. So ``generalize`` of these, then
        ``bench build`` of the subgraphs and the variants, gives tasks with both."""
        return list(dict.fromkeys(g["source"] for t in self.tasks for g in t.graphs))

    def manifest(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("out_dir")
        d["counts"] = {
            split: {
                "tasks": len(self.split(split)),
                "graphs": sum(len(t.graphs) for t in self.split(split)),
            }
            for split in ("train", "eval")
        }
        return d


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


CANDIDATE_SCHEMA_VERSION = 1


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
    kind = str(provenance.get("kind", "graph")) if isinstance(provenance, dict) else "graph"
    return BenchGraph(
        str(path),
        _op_sequence(sample),
        shape_bucket(m.shape for m in tensors),
        dtype,
        sample.graph_hash,
        kind,
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


def _write_task(task_dir: Path, task: BenchTask) -> None:
    """Write one task with the one task writer; its BenchTask becomes ``task.json``'s metadata."""
    graphs = [
        TaskGraph(g["path"], Path(g["source"]), {k: v for k, v in g.items() if k != "path"})
        for g in task.graphs
    ]
    metadata = {
        "builder": "bench",
        "split": task.split,
        "kind": task.kind,
        "op_sequence": task.op_sequence,
    }
    write_task(task_dir, graphs, name=task.name, metadata=metadata)


def _record_task(catalog: Any, out: Path, task: BenchTask, seed: int, stride: int) -> None:
    """Record a task and its graphs. A task's graph is a copy of a subgraph or variant: the
    task's samples are those sources, each recorded with its own kind (``fusible``,
    ``variant``, ...), and the copies' paths in the task are in ``extra["graphs"]``."""
    sources = []
    for g in task.graphs:
        source = Path(g["source"])
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
            "graphs": [{"path": g["path"], "source": g["source"]} for g in task.graphs],
        },
    )


def build_bench(
    paths: str | Path | Iterable[str | Path],
    out_dir: str | Path,
    *,
    seed: int = 0,
    stride: int = 1,
    eval_fraction: float = 0.2,
    max_graphs_per_task: int = 16,
    kinds: Sequence[str] | None = None,
    overwrite: bool = False,
    catalog: Any = None,
    progress: bool = False,
    executor: Any = None,
    jobs: int = 1,
    isolated: bool = False,
    timeout_s: float = 600.0,
) -> BenchResult:
    """Assemble PassBench tasks (PassNet appendix B; docs/dataset_decompose.md) from subgraph
    samples into ``out_dir``.

    ``paths``: sample folders, folders searched for samples, or list files. ``stride``
    is σ of the stratified sampling; ``eval_fraction`` the share of operator
    sequences held out for ``eval``. ``kinds`` keeps only subgraphs of those kinds
    (``fusible``, ``classical``, ``single-op``; ``graph`` for whole graphs), as told
    by their ``graph_net.json``. ``out_dir`` must be absent or empty unless
    ``overwrite``. Unreadable samples, and graphs without tensor inputs, are listed in
    ``skipped`` with the reason. ``catalog``: a :class:`~passnet.dataset.Catalog` to record
    each task in, with its source samples (see :func:`_record_task`).

    The candidate step (each sample's bucket keys) is a dataset stage
    (:class:`BenchCandidateStage`): in this process by default, or with ``isolated``
    each sample in a child (``timeout_s``), on ``executor`` (default: this machine,
    ``jobs`` at once). The tasks do not depend on which.
    """

    if stride < 1:
        raise DatasetError(f"stride must be at least 1, got {stride}")
    if not 0.0 <= eval_fraction <= 1.0:
        raise DatasetError(f"eval_fraction must be in [0, 1], got {eval_fraction}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise DatasetError("output folder is not empty (use overwrite)", file=out)
        shutil.rmtree(out)
    samples = find_samples([paths] if isinstance(paths, (str, Path)) else paths)
    wanted = {k.replace("_", "-") for k in kinds} if kinds else None
    result = BenchResult(str(out), seed, stride, eval_fraction, max_graphs_per_task)
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
            result.skipped.append({"path": candidate.sample, "reason": candidate.reason})
        elif wanted is None or candidate.kind in wanted:
            graphs.append(candidate.graph())

    by_sequence: dict[tuple[str, ...], list[BenchGraph]] = {}
    seen_hashes: set[str] = set()
    for g in sorted(graphs, key=lambda g: (g.op_sequence, *g.sort_key())):
        if g.graph_hash in seen_hashes:
            continue  # the same graph (from another parent, or listed twice)
        seen_hashes.add(g.graph_hash)
        by_sequence.setdefault(g.op_sequence, []).append(g)

    sampled = {seq: _sample(by_sequence[seq], stride, seed, "\n".join(seq)) for seq in by_sequence}
    sampled = {
        seq: members for seq, members in sampled.items() if members
    }  # fewer than σ: none kept
    keys = sorted(sampled, key=lambda seq: _digest("\n".join(seq)))
    random.Random(seed).shuffle(keys)
    n_eval = round(len(keys) * eval_fraction)
    if eval_fraction > 0 and len(keys) >= 2:
        n_eval = min(max(n_eval, 1), len(keys) - 1)
    eval_keys = set(keys[:n_eval])

    tasks: list[BenchTask] = []
    for seq in sorted(sampled, key=_task_name):
        representatives: dict[tuple[Any, ...], BenchGraph] = {}
        for g in sampled[seq]:
            representatives.setdefault((g.shape_bucket, g.dtype), g)
        order = sorted(representatives, key=lambda k: (k[0], _DTYPE_ORDER.get(k[1], 9), k[1]))
        chosen = [representatives[k] for k in order][:max_graphs_per_task]
        split = "eval" if seq in eval_keys else "train"
        task = BenchTask(_task_name(seq), split, chosen[0].kind, list(seq))
        for g in chosen:
            name = f"{Path(g.path).name}_{g.graph_hash[:10]}"
            task.graphs.append(
                {
                    "path": f"graphs/{g.dtype}/{_bucket_dir(g.shape_bucket)}/{name}",
                    "source": g.path,
                    "dtype": g.dtype,
                    "shape_bucket": [list(b) for b in g.shape_bucket],
                    "graph_hash": g.graph_hash,
                }
            )
        tasks.append(task)
    train_ops = {tuple(t.op_sequence) for t in tasks if t.split == "train"}
    eval_ops = {tuple(t.op_sequence) for t in tasks if t.split == "eval"}
    if train_ops & eval_ops:  # cannot happen by construction; a leak would void the benchmark
        raise DatasetError("an operator sequence is in both train and eval")

    out.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        _write_task(out / task.split / task.name, task)
        result.tasks.append(task)
        if catalog is not None:
            try:
                _record_task(catalog, out, task, seed, stride)
            except PassnetError as exc:
                log.warning("catalog: cannot record task %s: %s", task.name, exc)
    (out / "manifest.json").write_text(
        json.dumps(result.manifest(), indent=2, sort_keys=True) + "\n"
    )
    return result
