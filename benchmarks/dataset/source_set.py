#!/usr/bin/env python3
"""The benchmark's source set: the corpus samples the PassBench-GN build decomposes.

Re-derives ``benchmarks/dataset/source_set.txt`` (sample paths relative to the corpus root,
sorted) from the corpus folder and the committed eager-sweep records, and prints the counts
by family (docs/results/source_set.md states the rule and why it picks that many)::

    PYTHONPATH=src python3 benchmarks/dataset/source_set.py --root /path/to/graphnet-corpus \\
        [--cache features.jsonl] [--json benchmarks/dataset/results/source_set.json] \\
        [--calibrate subgraphs/decompose.jsonl]

Each sample is read as text, nothing is run or imported (so the result does not depend on
the machine or the torch version): its ``graph_hash.txt``, the tensor bytes its metadata
declares, and the operator names of its ``model.py`` forward (:func:`model_ops`). The rule
(:func:`select_sources`, parameters in :class:`Rule`): a pool of the samples whose latest
sweep record is ``ok``, that declare at most 1 GiB of tensors, and whose graph hash and
operator sequence no earlier sample has; two samples per family first; then, greedily, the
sample adding the most distinct 4-operator windows not yet held, until the set holds 90 %
of the pool's windows. Ties go to the smaller SHA-256 of ``"{seed}:{sample}"`` (seed 0).

``--calibrate`` reads decompose records of some samples and scales the distinct fusible and
classical operator sequences they hold per distinct window to the chosen set: an estimate
of what the set yields, not a measurement.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import heapq
import importlib.util
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 3
"""Version of the feature records: a change of what :func:`scan_sample` reads changes it, and
a cache's records of another version are read again."""
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class SampleFeatures:
    """What the selection knows of one corpus sample, without running it."""

    sample: str
    """Path relative to the corpus root (``timm/coat_small``)."""
    graph_hash: str
    """``graph_hash.txt`` ("" when the sample has none)."""
    tensor_bytes: int
    """Bytes of every input and weight its metadata declares (0 when it cannot be read)."""
    ops: tuple[str, ...]
    """Operator names of its ``model.py`` forward, in evaluation order (:func:`model_ops`)."""
    error: str = ""
    """Why its files could not be read ("" when they were)."""

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **asdict(self), "ops": list(self.ops)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SampleFeatures:
        if d.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"feature record of {d.get('sample')!r}: schema_version {d.get('schema_version')!r}, expected {SCHEMA_VERSION}"
            )
        return cls(
            d["sample"],
            d["graph_hash"],
            int(d["tensor_bytes"]),
            tuple(d["ops"]),
            d.get("error", ""),
        )


_BINARY = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "truediv",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.BitAnd: "and_",
    ast.BitOr: "or_",
    ast.BitXor: "xor",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
}
_COMPARE = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Is: "is_",
    ast.IsNot: "is_not",
    ast.In: "contains",
    ast.NotIn: "contains",
}
_UNARY = {ast.USub: "neg", ast.Invert: "invert", ast.Not: "not_", ast.UAdd: "pos"}
_NAMESPACES = ("torch", "operator", "math", "builtins")
_LITERAL_NAMES = frozenset({"inf", "nan"})
"""Names a GraphNet ``model.py`` imports as float constants (``from torch import inf``)."""
_NOT_OPS = frozenset({"slice", "device", "_set_grad_enabled"})
"""Calls in a GraphNet ``model.py`` that build arguments or set modes, not operators."""


def _call_name(func: ast.expr, out: list[str]) -> None:
    if isinstance(func, ast.Attribute):
        base = func.value
        while isinstance(base, ast.Attribute):
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in _NAMESPACES):
            _ops(func.value, out)  # a method: its receiver is evaluated first
        name = func.attr
    elif isinstance(func, ast.Name):
        name = func.id
    else:
        _ops(func, out)
        return
    if name not in _NOT_OPS:
        out.append(name)


def _ops(expr: ast.expr | None, out: list[str]) -> None:
    """Operator names of ``expr`` in evaluation order (operands first)."""
    if expr is None or isinstance(expr, ast.Constant | ast.Name):
        return
    if isinstance(expr, ast.Call):
        for a in expr.args:
            _ops(a, out)
        for k in expr.keywords:
            _ops(k.value, out)
        _call_name(expr.func, out)
    elif isinstance(expr, ast.BinOp):
        _ops(expr.left, out)
        _ops(expr.right, out)
        out.append(_BINARY.get(type(expr.op), "binop"))
    elif isinstance(expr, ast.UnaryOp):
        literal = isinstance(expr.operand, ast.Constant) or (
            isinstance(expr.operand, ast.Name) and expr.operand.id in _LITERAL_NAMES
        )
        if not literal:  # -1 and -inf are literals, not negations
            _ops(expr.operand, out)
            out.append(_UNARY.get(type(expr.op), "unary"))
    elif isinstance(expr, ast.Compare):
        _ops(expr.left, out)
        for c in expr.comparators:
            _ops(c, out)
        out.append(_COMPARE.get(type(expr.ops[0]), "compare"))
    elif isinstance(expr, ast.Subscript):
        _ops(expr.value, out)
        _ops(expr.slice, out)
        out.append("getitem")
    elif isinstance(expr, ast.Tuple | ast.List):
        for e in expr.elts:
            _ops(e, out)
    elif isinstance(expr, ast.Attribute):  # x.shape, x.dtype: metadata, not an operator
        _ops(expr.value, out)
    elif isinstance(expr, ast.Slice):
        for e in (expr.lower, expr.upper, expr.step):
            _ops(e, out)


def model_ops(source: str) -> tuple[str, ...]:
    """The operator names of a GraphNet ``model.py``'s ``forward``, read from its text.

    A GraphNet model is straight-line code written from an FX graph (one operator a
    statement, mostly), so the names in evaluation order are the graph's operator
    sequence up to spelling: ``torch.nn.functional.relu``, ``torch.relu`` and
    ``x.relu()`` all read ``relu``; ``a + b`` reads ``add``; ``x[i]`` reads ``getitem``.
    Nothing is imported or run, so the result does not depend on the torch version.
    """
    tree = ast.parse(source)
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            for st in node.body:
                if isinstance(st, ast.AugAssign):  # out += x: operator.iadd, read as add
                    _ops(st.value, out)
                    out.append(_BINARY.get(type(st.op), "binop"))
                elif isinstance(st, ast.Assign | ast.AnnAssign | ast.Expr | ast.Return):
                    _ops(st.value, out)
                    targets = (
                        st.targets if isinstance(st, ast.Assign) else [getattr(st, "target", None)]
                    )
                    for t in targets:
                        if isinstance(t, ast.Subscript):  # x[i] = v: operator.setitem
                            _ops(t.value, out)
                            _ops(t.slice, out)
                            out.append("setitem")
            break
    return tuple(out)


_DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}
_META_ENTRY = re.compile(r"shape = \[([^\]]*)\]\s*\n\s*dtype = \"torch\.(\w+)\"")


def meta_bytes(text: str, file: str) -> int:
    """Bytes of the tensors a ``weight_meta.py``/``input_meta.py`` declares (shape × dtype)."""
    total = 0
    for shape, dtype in _META_ENTRY.findall(text):
        if dtype not in _DTYPE_BYTES:
            raise ValueError(f"{file}: dtype torch.{dtype} has no size here")
        numel = 1
        for dim in shape.split(","):
            if dim.strip():
                numel *= int(dim)
        total += numel * _DTYPE_BYTES[dtype]
    return total


def scan_sample(root: Path, rel: str) -> SampleFeatures:
    """Read one sample's files as text: its graph hash, tensor bytes and operator names."""
    path = root / rel
    graph_hash = (
        (path / "graph_hash.txt").read_text().strip() if (path / "graph_hash.txt").is_file() else ""
    )
    try:
        ops = model_ops((path / "model.py").read_text())
        nbytes = sum(
            meta_bytes((path / name).read_text(), str(path / name))
            for name in ("weight_meta.py", "input_meta.py")
            if (path / name).is_file()
        )
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError) as exc:
        return SampleFeatures(rel, graph_hash, 0, (), f"{type(exc).__name__}: {exc}"[:500])
    return SampleFeatures(rel, graph_hash, nbytes, ops)


def corpus_samples(root: Path) -> list[str]:
    """Every sample folder under ``root`` (one holding ``model.py``), relative, sorted."""
    return sorted(p.parent.relative_to(root).as_posix() for p in root.rglob("model.py"))


def scan_corpus(root: Path, cache: Path | None = None) -> list[SampleFeatures]:
    """Features of every corpus sample, in path order. With ``cache`` (JSON Lines), records
    found there are reused and new ones appended, so a stopped scan resumes."""
    known: dict[str, SampleFeatures] = {}
    if cache is not None and cache.is_file():
        for n, line in enumerate(cache.read_text().splitlines(), 1):
            if line.strip():
                try:
                    d = json.loads(line)
                    if d.get("schema_version") != SCHEMA_VERSION:
                        continue  # written by another version of the reader: read again
                    f = SampleFeatures.from_json(d)
                except (ValueError, KeyError, TypeError) as exc:
                    raise SystemExit(f"{cache}:{n}: not a feature record: {exc}") from exc
                known[f.sample] = f
    out = []
    sink = cache.open("a") if cache is not None else None
    try:
        for rel in corpus_samples(root):
            f = known.get(rel)
            if f is None:
                f = scan_sample(root, rel)
                if sink is not None:
                    sink.write(json.dumps(f.to_json(), sort_keys=True) + "\n")
            out.append(f)
    finally:
        if sink is not None:
            sink.close()
    return out


# --- the rule -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """The selection rule's parameters (defaults: the committed source set)."""

    seed: int = 0
    """Breaks ties between samples of equal gain (SHA-256 of ``"{seed}:{sample}"``)."""
    window: int = 4
    """Length of the operator windows that measure a sample's novelty."""
    max_tensor_bytes: int = 1 << 30
    """Samples whose metadata declares more tensor bytes are left out (pipeline memory and time)."""
    min_per_family: int = 2
    """Samples each family gets first, whatever their gain (fewer where it has fewer)."""
    coverage: float = 0.90
    """Stop once the chosen samples hold this share of the pool's distinct windows."""

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be at least 1, got {self.window}")
        if not 0.0 < self.coverage <= 1.0:
            raise ValueError(f"coverage must lie in (0, 1], got {self.coverage}")
        if self.min_per_family < 0 or self.max_tensor_bytes < 0:
            raise ValueError("min_per_family and max_tensor_bytes must not be negative")


def windows(ops: tuple[str, ...], n: int) -> frozenset[tuple[str, ...]]:
    """Distinct runs of ``n`` consecutive operators (the whole sequence when shorter)."""
    if len(ops) < n:
        return frozenset({ops}) if ops else frozenset()
    return frozenset(ops[i : i + n] for i in range(len(ops) - n + 1))


def tie_rank(seed: int, sample: str) -> str:
    """The order among samples of equal gain: a seeded hash, not the path, so that no family
    or name wins ties by its spelling."""
    return hashlib.sha256(f"{seed}:{sample}".encode()).hexdigest()


@dataclass(frozen=True)
class Pick:
    """One chosen sample, in the order the rule took it."""

    sample: str
    gain: int
    """Windows it added that no sample chosen before held."""
    phase: str
    """``family`` (the per-family minimum) or ``coverage`` (the greedy)."""


@dataclass
class Selection:
    """The outcome of :func:`select_sources`: the picks in order, and why the others are out."""

    rule: Rule
    picks: list[Pick]
    excluded: dict[str, str]
    """Sample → why it is not in the pool."""
    pool: list[str]
    pool_windows: int
    covered_windows: int

    @property
    def samples(self) -> list[str]:
        return sorted(p.sample for p in self.picks)

    def by_family(self) -> dict[str, dict[str, int]]:
        """Per family: samples scanned, each exclusion reason, the pool, the chosen."""
        rows: dict[str, Counter[str]] = {}
        for s, why in self.excluded.items():
            rows.setdefault(_family(s), Counter())[why] += 1
        for s in self.pool:
            rows.setdefault(_family(s), Counter())["pool"] += 1
        for p in self.picks:
            rows[_family(p.sample)]["chosen"] += 1
        for c in rows.values():
            c["scanned"] = c["pool"] + sum(
                v for k, v in c.items() if k not in ("pool", "chosen", "scanned")
            )
        return {f: dict(sorted(rows[f].items())) for f in sorted(rows)}


def _family(sample: str) -> str:
    return sample.split("/", 1)[0]


def select_sources(
    features: list[SampleFeatures], statuses: dict[str, str], rule: Rule = Rule()
) -> Selection:
    """The source set: a pure function of the features, the sweep statuses and the rule.

    1. Pool: samples whose latest sweep record is ``ok`` (not broken as published, not too
       large, no timeout), that read and declare at most ``max_tensor_bytes``, whose graph
       hash and operator sequence no earlier sample (path order) has.
    2. Each family, in name order and round-robin, gets its best sample until it has
       ``min_per_family`` (or its whole pool).
    3. Then the sample adding the most windows not yet held, repeatedly, until the chosen
       hold ``coverage`` of the pool's distinct windows (or no sample adds any).

    "Best" is the most new windows; ties go to the smaller :func:`tie_rank`.
    """
    excluded: dict[str, str] = {}
    pool: dict[str, frozenset[tuple[str, ...]]] = {}
    hashes: set[str] = set()
    sequences: set[tuple[str, ...]] = set()
    for f in sorted(features, key=lambda f: f.sample):
        status = statuses.get(f.sample)
        if status is None:
            why = "no_sweep_record"
        elif status != "ok":
            why = f"sweep_{status}"
        elif f.error:
            why = "unreadable"
        elif f.tensor_bytes > rule.max_tensor_bytes:
            why = "over_max_bytes"
        elif f.graph_hash and f.graph_hash in hashes:
            why = "duplicate_hash"
        elif f.ops in sequences:
            why = "duplicate_ops"
        else:
            pool[f.sample] = windows(f.ops, rule.window)
            hashes.add(f.graph_hash)
            sequences.add(f.ops)
            continue
        excluded[f.sample] = why
    total = len(frozenset().union(*pool.values())) if pool else 0
    covered: set[tuple[str, ...]] = set()
    picks: list[Pick] = []

    def take(sample: str, phase: str) -> None:
        gain = len(pool[sample] - covered)
        covered.update(pool.pop(sample))
        picks.append(Pick(sample, gain, phase))

    def best(candidates: list[str]) -> str:
        return min(candidates, key=lambda s: (-len(pool[s] - covered), tie_rank(rule.seed, s)))

    families = sorted({_family(s) for s in pool})
    for _ in range(rule.min_per_family):
        for fam in families:
            members = [s for s in pool if _family(s) == fam]
            if members:
                take(best(members), "family")
    # Lazy greedy: a sample's gain only shrinks as windows are covered, so a stale gain is an
    # upper bound; the first sample whose fresh key still beats every stale key is the best.
    heap = [(-len(w - covered), tie_rank(rule.seed, s), s) for s, w in pool.items()]
    heapq.heapify(heap)
    while heap and len(covered) < rule.coverage * total:
        _, rank, s = heapq.heappop(heap)
        fresh = (-len(pool[s] - covered), rank, s)
        if heap and fresh > heap[0]:
            heapq.heappush(heap, fresh)
            continue
        if fresh[0] == 0:
            break
        take(s, "coverage")
    return Selection(
        rule, picks, excluded, sorted([*pool, *(p.sample for p in picks)]), total, len(covered)
    )


# --- inputs ---------------------------------------------------------------------------------------


def sweep_statuses(results: Path, reruns: list[Path]) -> dict[str, str]:
    """Each sample's latest eager-sweep status, a re-run's in place of the sweep's (the same
    reading as ``corpus_sweep_table.py``)."""
    spec = importlib.util.spec_from_file_location(
        "corpus_sweep_table", Path(__file__).with_name("corpus_sweep_table.py")
    )
    assert spec is not None and spec.loader is not None
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    latest = table._latest(str(results), [str(r) for r in reruns])
    return {
        graph: getattr(record.status, "value", str(record.status))
        for graph, record in latest.items()
    }


def calibrate(manifests: list[Path], features: list[SampleFeatures], window: int) -> dict[str, Any]:
    """Distinct operator sequences per kind that decompose records hold, against the distinct
    windows of the same samples: the ratios an estimate of a larger set scales by, and the
    running totals in record order (how both grow together)."""
    from passnet.dataset import read_decompose_manifest

    by_path = {f.sample: f for f in features}
    seqs: dict[str, set[tuple[str, ...]]] = {}
    held: set[tuple[str, ...]] = set()
    running = []
    for manifest in manifests:
        for r in read_decompose_manifest(manifest):
            rel = r.name or Path(r.sample).relative_to(r.root).as_posix()
            if rel not in by_path or r.status != "ok":
                continue
            held |= windows(by_path[rel].ops, window)
            for sub in r.subgraphs:
                if sub.status in ("written", "duplicate"):
                    seqs.setdefault(sub.kind, set()).add(tuple(sub.ops))
            running.append(
                {
                    "sample": rel,
                    "windows": len(held),
                    **{k: len(v) for k, v in sorted(seqs.items())},
                }
            )
    return {
        "samples": len(running),
        "windows": len(held),
        "sequences": {k: len(v) for k, v in sorted(seqs.items())},
        "per_window": {k: round(len(v) / len(held), 4) for k, v in sorted(seqs.items()) if held},
        "running": running,
    }


# --- command --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", required=True, type=Path, help="the corpus folder")
    ap.add_argument(
        "--sweep", type=Path, default=HERE.parent / "results/corpus_eager_cpu/results.jsonl"
    )
    ap.add_argument(
        "--rerun",
        type=Path,
        action="append",
        default=None,
        help="sweep re-run records (replace the sweep's)",
    )
    ap.add_argument("--cache", type=Path, help="feature cache (JSON Lines): reused and extended")
    ap.add_argument("--out", type=Path, default=HERE / "source_set.txt")
    ap.add_argument(
        "--json", type=Path, help="also write the selection (order, gains, counts) here"
    )
    ap.add_argument(
        "--calibrate",
        type=Path,
        action="append",
        default=[],
        metavar="DECOMPOSE.jsonl",
        help="decompose records: project distinct sequences per kind for the set",
    )
    ap.add_argument("--seed", type=int, default=Rule.seed)
    ap.add_argument("--window", type=int, default=Rule.window)
    ap.add_argument("--max-tensor-mib", type=int, default=Rule.max_tensor_bytes >> 20)
    ap.add_argument("--min-per-family", type=int, default=Rule.min_per_family)
    ap.add_argument("--coverage", type=float, default=Rule.coverage)
    args = ap.parse_args(argv)
    if not (args.root / ".").is_dir():
        ap.error(f"--root {args.root}: not a folder")
    if not args.sweep.is_file():
        ap.error(f"--sweep {args.sweep}: no such file")
    reruns = (
        args.rerun if args.rerun is not None else sorted(args.sweep.parent.glob("*_rerun.jsonl"))
    )
    try:
        rule = Rule(
            args.seed, args.window, args.max_tensor_mib << 20, args.min_per_family, args.coverage
        )
    except ValueError as exc:
        ap.error(str(exc))
    features = scan_corpus(args.root, args.cache)
    selection = select_sources(features, sweep_statuses(args.sweep, reruns), rule)
    args.out.write_text("".join(s + "\n" for s in selection.samples))
    rows = selection.by_family()
    reasons = sorted({k for r in rows.values() for k in r} - {"scanned", "pool", "chosen"})
    cols = ["scanned", *reasons, "pool", "chosen"]
    print("| family | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for fam, r in rows.items():
        print(f"| {fam} | " + " | ".join(str(r.get(c, 0)) for c in cols) + " |")
    total = {c: sum(r.get(c, 0) for r in rows.values()) for c in cols}
    print("| all | " + " | ".join(str(total[c]) for c in cols) + " |")
    print(
        f"windows of {rule.window} ops: {selection.covered_windows} of {selection.pool_windows} "
        f"({selection.covered_windows / max(selection.pool_windows, 1):.1%}); "
        f"{len(selection.picks)} samples -> {args.out}"
    )
    summary: dict[str, Any] = {
        "rule": asdict(rule),
        "by_family": rows,
        "pool_windows": selection.pool_windows,
        "covered_windows": selection.covered_windows,
        "picks": [asdict(p) for p in selection.picks],
    }
    if args.calibrate:
        cal = calibrate(args.calibrate, features, rule.window)
        cal["projected"] = {
            k: round(r * selection.covered_windows) for k, r in cal["per_window"].items()
        }
        summary["calibration"] = cal
        print(
            f"calibration on {cal['samples']} decomposed samples: {cal['windows']} windows, "
            f"distinct sequences {cal['sequences']}; projected for the set: {cal['projected']}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
