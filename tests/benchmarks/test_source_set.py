"""benchmarks/dataset/source_set.py: the benchmark's source set is a pure function of the
corpus files, the sweep statuses and the rule, and obeys the rule (on a synthetic corpus)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from tests.benchmarks.scripts import benchmark_script


@pytest.fixture(scope="module")
def ss():
    with benchmark_script("dataset/source_set.py") as module:
        yield module


MODEL = """import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_w_: torch.nn.parameter.Parameter):
        l_x_ = L_x_
        l_w_ = L_w_
        conv2d = torch.conv2d(l_x_, l_w_, None, (1, 1), (0, 0), (1, 1), 1)
        l_x_ = l_w_ = None
        x = torch.nn.functional.batch_norm(conv2d, None, None, None, None, False, 0.1, 1e-05)
        y = x.relu()
        z = y + x
        s = z[(slice(None, None, None), slice(0, 1, None))]
        v = s.view(1, -1)
        mean = torch.mean(v, dim = -1)
        mean += v
        m = mean.masked_fill(v, -inf)
        v[(Ellipsis, 0)] = mean
        return (mean,)
"""

META = """class Program_weight_tensor_meta_L_x_:
    name = "L_x_"
    shape = [1, 3, 8, 8]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.0
    std = 1.0
    data = None


class Program_weight_tensor_meta_L_w_:
    name = "L_w_"
    shape = [4, 3, 1, 1]
    dtype = "torch.float16"
    device = "cpu"
    mean = 0.0
    std = 1.0
    data = None
"""


def test_model_ops_reads_the_forward_in_evaluation_order(ss):
    assert ss.model_ops(MODEL) == (
        "conv2d",
        "batch_norm",
        "relu",
        "add",
        "getitem",  # slice(...) builds the index; -1 is a literal, not a negation
        "view",
        "mean",
        "add",  # mean += v
        "masked_fill",  # -inf is a literal
        "setitem",  # v[...] = mean
    )


def test_meta_bytes_is_shape_times_dtype(ss):
    assert ss.meta_bytes(META, "weight_meta.py") == 1 * 3 * 8 * 8 * 4 + 4 * 3 * 2
    with pytest.raises(ValueError, match="weight_meta.py: dtype torch.qint8"):
        ss.meta_bytes('shape = [2]\n    dtype = "torch.qint8"', "weight_meta.py")


def _write_sample(root: Path, rel: str, body: str, *, graph_hash: str | None = None) -> None:
    path = root / rel
    path.mkdir(parents=True)
    (path / "model.py").write_text(MODEL.replace("        y = x.relu()\n", body))
    (path / "weight_meta.py").write_text(META)
    (path / "graph_hash.txt").write_text(graph_hash or hashlib.sha256(rel.encode()).hexdigest())


def test_scan_corpus_reads_every_sample_and_resumes_from_its_cache(ss, tmp_path):
    root = tmp_path / "corpus"
    _write_sample(root, "timm/a", "        y = x.relu()\n")
    _write_sample(root, "hf/org/b", "        y = x.gelu()\n")
    (root / "hf/org/c").mkdir(parents=True)
    (root / "hf/org/c/model.py").write_text("def forward(:\n")
    cache = tmp_path / "features.jsonl"
    first = ss.scan_corpus(root, cache)
    assert [f.sample for f in first] == ["hf/org/b", "hf/org/c", "timm/a"]
    assert first[0].ops[2] == "gelu" and first[0].tensor_bytes == 792 and not first[0].error
    assert first[1].error.startswith("SyntaxError") and first[1].ops == ()
    (root / "timm/a/model.py").write_text("broken now")  # a cached sample is not read again
    assert ss.scan_corpus(root, cache) == first
    assert len(cache.read_text().splitlines()) == 3
    # a record of another version of the reader is read again, not trusted
    lines = cache.read_text().splitlines()
    assert '"sample": "timm/a"' in lines[2]
    lines[2] = lines[2].replace('"schema_version": 3', '"schema_version": 1')
    cache.write_text("".join(line + "\n" for line in lines))
    again = ss.scan_corpus(root, cache)
    assert again[0] == first[0] and again[2].error.startswith("SyntaxError")


def _features(ss, n: int, seed: int) -> tuple[list, dict[str, str]]:
    rng = random.Random(seed)
    vocab = [f"op{i}" for i in range(12)]
    feats, statuses = [], {}
    for i in range(n):
        fam = f"fam{i % 4}"
        ops = tuple(rng.choice(vocab[: 4 + i % 8]) for _ in range(rng.randint(3, 30)))
        name = f"{fam}/s{i:03d}"
        feats.append(ss.SampleFeatures(name, f"h{i}", rng.randint(1, 100), ops))
        statuses[name] = "ok"
    return feats, statuses


def _naive(ss, feats, statuses, rule):
    """The rule written out the slow way: recompute every gain at every step."""
    sel = ss.select_sources(feats, statuses, ss.Rule(**{**rule.__dict__, "coverage": 1e-9}))
    pool = {s: ss.windows(f.ops, rule.window) for f in feats if (s := f.sample) in sel.pool}
    total = len(frozenset().union(*pool.values()))
    covered: set = set()
    picks = []
    fams = sorted({s.split("/")[0] for s in pool})
    key = lambda s: (-len(pool[s] - covered), ss.tie_rank(rule.seed, s))  # noqa: E731
    for _ in range(rule.min_per_family):
        for fam in fams:
            members = [s for s in pool if s.split("/")[0] == fam and s not in picks]
            if members:
                s = min(members, key=key)
                picks.append(s)
                covered |= pool[s]
    while len(covered) < rule.coverage * total:
        rest = [s for s in pool if s not in picks]
        if not rest or not (pool[s := min(rest, key=key)] - covered):
            break
        picks.append(s)
        covered |= pool[s]
    return picks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_is_the_greedy_rule_and_deterministic(ss, seed):
    feats, statuses = _features(ss, 80, seed)
    rule = ss.Rule(seed=seed, window=3, min_per_family=2, coverage=0.8)
    sel = ss.select_sources(feats, statuses, rule)
    assert [p.sample for p in sel.picks] == _naive(ss, feats, statuses, rule)
    shuffled = feats[:]
    random.Random(99).shuffle(shuffled)
    again = ss.select_sources(shuffled, dict(reversed(statuses.items())), rule)
    assert again.picks == sel.picks and again.samples == sel.samples
    assert sel.samples == sorted(sel.samples)
    # it stops as soon as the coverage is reached: one sample fewer would fall short
    assert sel.covered_windows >= 0.8 * sel.pool_windows
    but_last = {p.sample for p in sel.picks[:-1]}
    held = frozenset().union(*(ss.windows(f.ops, 3) for f in feats if f.sample in but_last))
    assert len(held) < 0.8 * sel.pool_windows
    assert all(p.gain > 0 for p in sel.picks if p.phase == "coverage")
    assert sum(p.gain for p in sel.picks) == sel.covered_windows


def test_every_family_gets_its_minimum_even_without_gain(ss):
    ops = ("a", "b", "c", "d", "e")
    feats = [
        ss.SampleFeatures("big/x", "h1", 1, ops * 3 + ("f", "g", "h")),
        ss.SampleFeatures("big/y", "h2", 1, ("x", "y", "z", "w", "v", "u")),
        ss.SampleFeatures("tiny/only", "h3", 1, ("a", "b", "c", "d")),  # adds nothing new
    ]
    statuses = {f.sample: "ok" for f in feats}
    sel = ss.select_sources(feats, statuses, ss.Rule(window=2, min_per_family=1, coverage=1.0))
    assert [(p.sample, p.phase) for p in sel.picks] == [
        ("big/x", "family"),
        ("tiny/only", "family"),
        ("big/y", "coverage"),
    ]
    assert sel.picks[1].gain == 0
    assert sel.by_family()["tiny"] == {"chosen": 1, "pool": 1, "scanned": 1}


def test_exclusions_follow_the_sweep_the_size_and_duplicates(ss):
    ops = ("a", "b", "c", "d")
    feats = [
        ss.SampleFeatures("f/broken", "h1", 10, ops + ("x",)),
        ss.SampleFeatures("f/huge", "h2", 2048, ops + ("y",)),
        ss.SampleFeatures("f/keep", "h3", 10, ops + ("z",)),
        ss.SampleFeatures("f/same_hash", "h3", 10, ops + ("w",)),
        ss.SampleFeatures("f/same_ops", "h4", 10, ops + ("z",)),
        ss.SampleFeatures("f/unread", "", 0, (), "SyntaxError: x"),
        ss.SampleFeatures("f/unswept", "h5", 10, ops + ("v",)),
        ss.SampleFeatures("g/other", "h6", 10, ("q", "r")),
    ]
    statuses = {f.sample: "ok" for f in feats if f.sample != "f/unswept"}
    statuses["f/broken"] = "sample_error"
    sel = ss.select_sources(feats, statuses, ss.Rule(window=2, max_tensor_bytes=1024, coverage=1.0))
    assert sel.excluded == {
        "f/broken": "sweep_sample_error",
        "f/huge": "over_max_bytes",
        "f/same_hash": "duplicate_hash",
        "f/same_ops": "duplicate_ops",
        "f/unread": "unreadable",
        "f/unswept": "no_sweep_record",
    }
    assert sel.samples == ["f/keep", "g/other"]


def test_rule_rejects_bad_parameters(ss):
    with pytest.raises(ValueError, match="coverage"):
        ss.Rule(coverage=0.0)
    with pytest.raises(ValueError, match="window"):
        ss.Rule(window=0)


def test_calibrate_counts_distinct_sequences_per_window(ss, tmp_path):
    import json

    from passnet.dataset import DecomposeResult, SubgraphRecord, SubgraphStatus

    feats = [
        ss.SampleFeatures("f/a", "h1", 1, ("a", "b", "c", "d")),  # windows of 2: ab bc cd
        ss.SampleFeatures("f/b", "h2", 1, ("a", "b", "x")),  # adds bx
    ]

    def record(name, subs):
        return DecomposeResult(
            sample=f"/c/{name}",
            name=name,
            root="/c",
            subgraphs=[
                SubgraphRecord(kind, 0, len(ops), list(ops), SubgraphStatus(status))
                for kind, ops, status in subs
            ],
        )

    records = [
        record("f/a", [("fusible", "ab", "written"), ("classical", "abcd", "duplicate")]),
        record("f/b", [("fusible", "ab", "written"), ("fusible", "bx", "failed")]),
        DecomposeResult(sample="/c/f/gone", name="f/gone", root="/c", status="crashed"),
    ]
    manifest = tmp_path / "decompose.jsonl"
    manifest.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    cal = ss.calibrate([manifest], feats, 2)
    assert cal["windows"] == 4 and cal["samples"] == 2
    assert cal["sequences"] == {"classical": 1, "fusible": 1}  # the failed one is no sequence
    assert cal["per_window"] == {"classical": 0.25, "fusible": 0.25}
    assert [r["windows"] for r in cal["running"]] == [3, 4]
