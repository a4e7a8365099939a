"""Graph labels shortened for a terminal keep what tells them apart."""

from __future__ import annotations

from passnet.runner import short_labels

QUICK = [
    "transformers-auto-model/prajjwal1_bert-tiny",
    "transformers-auto-model/opt-tiny-random",
    "timm/sequencer2d_l.in1k",
    "transformers-auto-model/sadhaklal_mlp-iris",
]


def test_labels_that_fit_are_kept_whole() -> None:
    assert short_labels(QUICK, 60) == QUICK
    assert short_labels([], 10) == []


def test_the_distinguishing_tail_is_kept_where_rich_would_cut_the_end() -> None:
    shown = short_labels(QUICK, 24)
    assert all(len(s) <= 24 for s in shown)
    assert len(set(shown)) == len(QUICK)  # rich's cut gave "transformers-auto-mode…" 3 times
    for label, s in zip(QUICK, shown, strict=True):
        assert s.endswith(label.rsplit("/", 1)[1])  # the sample's name, whole
        assert s.startswith(label[:3])  # and the start of where it comes from


def test_folders_every_label_shares_are_dropped_first() -> None:
    labels = [f"/data/corpus/transformers-auto-model/{name}" for name in ("a-model", "b-model")]
    assert short_labels(labels, 12) == ["…/a-model", "…/b-model"]


def test_a_long_name_loses_its_middle_and_labels_stay_distinct() -> None:
    labels = ["family/" + "x" * 40 + "-first", "family/" + "x" * 40 + "-other"]
    shown = short_labels(labels, 20)
    assert all(len(s) <= 20 for s in shown) and shown[0] != shown[1]
    assert shown[0].endswith("-first") and "…" in shown[0]
    # names alike in all the room there is: kept whole, never shown alike
    same_tail = ["a/" + "y" * 30 + "/leaf", "b/" + "y" * 30 + "/leaf"]
    assert short_labels(same_tail, 5) == same_tail
