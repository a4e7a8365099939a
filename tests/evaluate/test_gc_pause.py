"""The cyclic garbage collector is paused while timing, and only then."""

from __future__ import annotations

import gc
import re

import pytest

from passnet.evaluate import EvalSettings, evaluate_sample, gc_paused
from passnet.status import Status
from tests.conftest import MLP, faulty


@pytest.fixture
def gc_restored():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_collected_first(gc_restored, monkeypatch) -> None:
    gc.enable()
    collected = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(True) or 0)
    with gc_paused(True):
        assert not gc.isenabled()
        assert collected == [True]
    assert gc.isenabled()


def test_restored_when_the_timed_block_raises(gc_restored) -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused(True):
        raise RuntimeError("timing failed")
    assert gc.isenabled()


def test_not_paused_when_off_and_a_disabled_collector_stays_disabled(gc_restored) -> None:
    gc.enable()
    with gc_paused(False):
        assert gc.isenabled()
    gc.disable()
    with gc_paused(True):
        assert not gc.isenabled()
    assert not gc.isenabled()


@pytest.mark.parametrize("pause", [True, False])
def test_child_pauses_only_the_timed_calls(tmp_path, pause: bool) -> None:
    log = tmp_path / "gc.log"
    settings = EvalSettings(warmup=2, trials=6, min_warmup_s=0.0, max_extra_s=0.0, pause_gc=pause)
    rec = evaluate_sample(MLP, faulty("RecordsGc"), {"log": str(log)}, settings=settings)
    assert rec.status is Status.OK, rec.error
    calls = log.read_text()
    assert rec.settings["pause_gc"] is pause
    if pause:
        # checks before timing and the fresh-input re-check after it run with the collector
        # on; every timed call (warm-up included) runs with it paused
        assert re.fullmatch(r"1+0+1", calls), calls
        assert calls.count("0") >= settings.warmup + settings.trials
    else:
        assert set(calls) == {"1"} and len(calls) >= 2 + settings.warmup + settings.trials
