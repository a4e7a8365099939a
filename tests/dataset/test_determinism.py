"""What decompose writes is a function of the graph and the seed: not of threads or jobs.

Real samples: GraphSAGE (a fixture taken from GraphNet: its ``scatter_add_`` made the
fusible spans follow the thread count), bert-tiny and mobilenet_v3_small (its
intermediate statistics followed the threads' reduction order).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.fx

from passnet.data import dev_samples_dir
from passnet.dataset import _subgraph, decompose_samples, trace_parent
from passnet.dataset._fusible import analyze_fusible, list_kernels
from passnet.dataset._lockstep import run_lockstep
from passnet.dataset._subgraph import (
    extract_subgraph,
    one_torch_thread,
    round_statistic,
    unit_ranges,
)
from tests.dataset.test_decompose_batch import _records, _tree

GRAPHSAGE = Path(__file__).parent / "samples" / "torchgeometric" / "GraphSAGE"
BERT_TINY = dev_samples_dir() / "transformers-auto-model" / "prajjwal1_bert-tiny"
MOBILENET = dev_samples_dir() / "torchvision" / "mobilenet_v3_small"


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_statistics_are_rounded_to_four_significant_digits() -> None:
    # The two values one mobilenet_v3_small input got with one and two threads.
    assert round_statistic(449.2096252441406) == round_statistic(449.20953369140625) == 449.2
    assert round_statistic(-0.000123456) == -0.0001235
    assert round_statistic(12345678.0) == 12350000.0
    for value in (0.0, float("inf"), -float("inf")):
        assert round_statistic(value) == value
    assert round_statistic(float("nan")) != round_statistic(float("nan"))  # NaN stays NaN


def test_one_torch_thread_restores_the_thread_count() -> None:
    with _threads(2):
        with one_torch_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2


def test_fusible_spans_do_not_depend_on_the_thread_count() -> None:
    parent = trace_parent(GRAPHSAGE, "cpu", 0)
    analyses = []
    for n in (1, 2):
        with _threads(n):
            analyses.append(analyze_fusible(parent))
            assert torch.get_num_threads() == n  # the analysis leaves the caller's threads alone
    one, two = analyses
    assert one.segments == two.segments and one.fused == two.fused
    # With the C++ backend, two threads made each scatter_add_ an ATen fallback of its own
    # (54 segments instead of 36); on a GPU (and with Triton's scheduling) it is generated code.
    assert not any(k.extern for k in one.kernels if any("scatter_add" in s for s in k.sources))


def test_the_cpu_analysis_follows_a_gpus_reduction_heuristics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torch._inductor.async_compile import AsyncCompile

    def compiles(*args: object, **kwargs: object) -> None:
        raise AssertionError("the analysis compiled a kernel")

    # Scheduling for Triton on CPU needs no compilation (nor a GPU): the hook stops before.
    for backend in ("triton", "cpp", "cpp_pybinding"):
        monkeypatch.setattr(AsyncCompile, backend, compiles)

    class ColumnSum(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).sum(0)

    gm = torch.fx.symbolic_trace(ColumnSum())
    # 4,096 outputs of a 4,096-element reduction: too few outputs for an H200's 132 SMs, so
    # Triton splits the reduction in two kernels; read as a CPU's (cores as SMs: 4,096 >=
    # 64 x cores below 64 cores), it would stay one kernel.
    kernels = list_kernels(gm, [torch.empty(4096, 4096)])
    assert [k.extern for k in kernels] == [False, False]


@pytest.mark.parametrize("digits", [None, 17], ids=["written", "full-precision"])
def test_intermediate_statistics_do_not_depend_on_the_thread_count(
    digits: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Full precision: the parent's values themselves are the same (the run that collects
    # them has one thread); rounding alone would hide most differences, not all.
    if digits is not None:
        monkeypatch.setattr(_subgraph, "STATISTIC_SIGNIFICANT_DIGITS", digits)
    parent = trace_parent(MOBILENET, "cpu", 0)
    subs = [extract_subgraph(parent, r) for r in unit_ranges(parent)[1:]]
    metas = []
    for n in (1, 2):
        with _threads(n):
            checks, _ = run_lockstep(parent, subs, feed_forward=False, collect_metas=True)
            assert torch.get_num_threads() == n
        assert all(c.ok for c in checks)
        metas.append([sorted(vars(m).items()) for c in checks for m in c.input_metas.values()])
    assert metas[0] == metas[1]
    assert len(metas[0]) > 100


@pytest.mark.slow
def test_decompose_writes_the_same_files_with_one_or_two_jobs(tmp_path: Path) -> None:
    # On a machine of 2 cores (or more), one job runs its child with all the cores as torch
    # threads and two jobs with half each: the files must not tell them apart.
    samples = [GRAPHSAGE, BERT_TINY, MOBILENET]
    one = tmp_path / "one"
    two = tmp_path / "two"
    results = decompose_samples(samples, one, jobs=1)
    assert [r.status for r in results] == ["ok"] * 3
    decompose_samples(samples, two, jobs=2)
    assert _tree(one) == _tree(two)
    assert _records(one) == _records(two)
    written = [p for p in _tree(one) if p.endswith("model.py")]
    assert len(written) > 100
