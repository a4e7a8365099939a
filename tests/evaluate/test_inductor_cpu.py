"""Integration: real dev samples, eager and TorchInductor on CPU, through the isolated child."""

from __future__ import annotations

import pytest

from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.record import record_from_dict
from passnet.status import Status
from tests.conftest import BERT, MLP, SYMINT_HEAD


@pytest.mark.parametrize("sample", [MLP, SYMINT_HEAD], ids=["mlp-iris", "sequencer-head-symint"])
def test_eager_against_eager_is_exactly_equal(sample, fast: EvalSettings) -> None:
    rec = evaluate_sample(sample, "eager", settings=fast)
    assert rec.status is Status.OK
    assert rec.correctness.equal and rec.correctness.max_diff == 0.0
    assert all(rec.correctness.allclose.values())
    assert rec.eager.e2e.n >= fast.trials and rec.compiled.e2e.n >= fast.trials
    assert rec.speedup_e2e > 0 and rec.speedup_device is None
    assert {"load", "compile", "measure", "total"} <= set(rec.phases_s)


@pytest.mark.parametrize("sample", [MLP, SYMINT_HEAD], ids=["mlp-iris", "sequencer-head-symint"])
def test_inductor_on_cpu_is_correct(sample, fast: EvalSettings) -> None:
    rec = evaluate_sample(sample, "inductor", settings=fast)
    assert rec.status is Status.OK, rec.error
    assert rec.correctness.draws == 2
    assert rec.correctness.allclose[-5]
    assert rec.versions["torch"]


@pytest.mark.slow
def test_inductor_on_bert_tiny_cpu(fast: EvalSettings) -> None:
    rec = evaluate_sample(
        BERT, "inductor", settings=EvalSettings(**{**fast.to_dict(), "timeout_s": 600})
    )
    assert rec.status in (Status.OK, Status.ACCURACY), rec.error
    assert rec.correctness.allclose[-3]
    assert rec.correctness.num_outputs == 2


def test_a_prepared_graph_compiles_once_from_the_caches_and_the_record_says_so(
    fast: EvalSettings,
) -> None:
    from passnet.evaluate import prepare_sample

    prepared = prepare_sample(MLP, "inductor", {}, "cpu", fast)
    assert prepared.ok, prepared.error
    rec = evaluate_sample(MLP, "inductor", {}, "cpu", fast, prepared=prepared.seconds)
    assert rec.status is Status.OK, rec.error
    cache = rec.compile_cache
    assert cache is not None and cache.prepared and cache.prepare_s == prepared.seconds
    assert cache.fxgraph_hits >= 1 and cache.fxgraph_misses == 0  # one compile, a cache hit
    alone = evaluate_sample(MLP, "inductor", {}, "cpu", fast)
    assert alone.compile_cache is not None and not alone.compile_cache.prepared
    assert alone.compile_cache.fxgraph_hits == 2  # warm: compiled twice, both from the cache
    # what each compiled with, defaults resolved: the prepared one loaded, so not warm
    assert alone.compile_options["torch_compile"] == {"backend": "inductor", "dynamic": None}
    assert (alone.compile_options["warm"], rec.compile_options["warm"]) == (True, False)
    assert record_from_dict(alone.to_dict()).compile_options == alone.compile_options
    eager = evaluate_sample(MLP, "eager", settings=fast)
    assert eager.compile_options == {}  # it says nothing
