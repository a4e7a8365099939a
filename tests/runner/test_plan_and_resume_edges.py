"""Edges of planning and resuming: clashing labels, changed settings, samples that do
not load, devices the machine lacks."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from passnet.errors import DeviceUnavailable, InputFormatError, StoreError
from passnet.evaluate import EvalSettings, evaluate_sample, probe_device
from passnet.runner import ResultStore, check_device, plan_items, read_records, run_evaluations
from passnet.runner._run import _settings_differences
from passnet.sample import find_samples
from passnet.status import Status
from tests.conftest import BERT, DEV, MLP


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def test_distinct_samples_with_the_same_label_get_distinct_labels(tmp_path: Path) -> None:
    a = _copy(MLP, tmp_path / "a" / "good")
    b = _copy(BERT, tmp_path / "b" / "good")
    items = plan_items([a, b])
    assert [i.label for i in items] == ["a/good", "b/good"]
    assert plan_items([a])[0].label == "good"  # no clash: the short label stays


def test_clashing_labels_keep_both_records_apart(tmp_path: Path, fast: EvalSettings) -> None:
    a = _copy(MLP, tmp_path / "a" / "good")
    b = _copy(BERT, tmp_path / "b" / "good")
    run = run_evaluations(
        plan_items([a, b]), compiler="eager", settings=fast, out_dir=tmp_path / "o", echo_logs=False
    )
    assert {r.graph for r in run.records} == {"a/good", "b/good"}
    assert len(read_records(tmp_path / "o" / "results.jsonl")) == 2


def test_resuming_with_other_settings_is_refused_naming_them(
    tmp_path: Path, fast: EvalSettings
) -> None:
    items = plan_items([MLP])
    run_evaluations(items, compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False)
    other = dataclasses.replace(fast, trials=fast.trials + 1, seed=5)
    with pytest.raises(StoreError) as err:
        run_evaluations(items, compiler="eager", settings=other, out_dir=tmp_path, echo_logs=False)
    assert "seed 0 there, 5 now" in err.value.message
    assert f"trials {fast.trials} there, {fast.trials + 1} now" in err.value.message
    # a longer timeout only changes a resource limit: that resumes
    longer = dataclasses.replace(fast, timeout_s=fast.timeout_s * 2)
    again = run_evaluations(
        items, compiler="eager", settings=longer, out_dir=tmp_path, echo_logs=False
    )
    assert again.resumed == 1 and again.evaluated == 0


@pytest.mark.parametrize(
    ("setting", "option"),
    [
        ("flush_l2", "--flush-l2"),
        ("replay_timing", "--replay-timing"),
        ("profile_kernels", "--profile-kernels"),
    ],
)
def test_cuda_only_settings_off_cuda_are_refused_before_anything_runs(
    tmp_path: Path, fast: EvalSettings, setting: str, option: str
) -> None:
    cuda_only = dataclasses.replace(fast, **{setting: True})
    with pytest.raises(
        DeviceUnavailable, match=f"{option} \\(settings {setting}\\) time on a GPU.*--device cuda"
    ):
        run_evaluations(plan_items([MLP]), compiler="eager", settings=cuda_only, out_dir=tmp_path)
    assert not (tmp_path / "results.jsonl").exists()
    with pytest.raises(ValueError, match=f"settings {setting}\\) time on a GPU.*not 'cpu'"):
        evaluate_sample(MLP, "eager", settings=cuda_only)


def test_a_record_from_before_the_cuda_only_settings_counts_as_measured_without_them() -> None:
    new = ("flush_l2", "replay_timing", "profile_kernels", "profile_calls")
    older = {k: v for k, v in EvalSettings().to_dict().items() if k not in new}
    assert _settings_differences(older, EvalSettings().to_dict(), "cuda") == []
    flushing = EvalSettings(flush_l2=True).to_dict()
    assert _settings_differences(older, flushing, "cuda") == ["flush_l2 False there, True now"]
    replaying = EvalSettings(replay_timing=True).to_dict()
    assert _settings_differences(older, replaying, "cuda") == [
        "replay_timing False there, True now"
    ]
    profiling = EvalSettings(profile_kernels=True, profile_calls=5).to_dict()
    assert _settings_differences(older, profiling, "cuda") == [
        "profile_kernels False there, True now"
    ]
    # other settings added since are still compared only where both records know them
    # (the core guard's settings have values for records without them: see the next test)
    guarded = {"trials": 100, "core_guard": True, "host_wait_s": 2.0, "fixed_layout": True}
    assert _settings_differences(guarded, EvalSettings().to_dict(), "cuda") == []


def test_a_record_from_before_fixed_layouts_was_measured_with_random_ones() -> None:
    older = {k: v for k, v in EvalSettings().to_dict().items() if k != "fixed_layout"}
    for device in ("cpu", "cuda"):  # the layout matters to CPU timing as much
        assert _settings_differences(older, EvalSettings().to_dict(), device) == [
            "fixed_layout False there, True now"
        ]
        random = EvalSettings(fixed_layout=False).to_dict()
        assert _settings_differences(older, random, device) == []


def test_a_sample_that_does_not_load_is_resumed_and_superseded_once_fixed(
    tmp_path: Path, fast: EvalSettings
) -> None:
    sample = _copy(MLP, tmp_path / "s" / "mlp")
    meta = sample / "weight_meta.py"
    good = meta.read_text()
    meta.write_text(good.replace("shape = [", "shape = ['x', ", 1))
    out = tmp_path / "o"
    first = run_evaluations(
        plan_items([sample]), compiler="eager", settings=fast, out_dir=out, echo_logs=False
    )
    assert first.records[0].status is Status.SAMPLE_ERROR
    second = run_evaluations(
        plan_items([sample]), compiler="eager", settings=fast, out_dir=out, echo_logs=False
    )
    assert second.resumed == 1 and second.evaluated == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 1  # not appended again
    meta.write_text(good)
    fixed = run_evaluations(
        plan_items([sample]), compiler="eager", settings=fast, out_dir=out, echo_logs=False
    )
    assert fixed.evaluated == 1 and fixed.records[0].status is Status.OK
    # the file keeps both lines; readers and the store see only the newer one
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert [r.status for r in read_records(out / "results.jsonl")] == [Status.OK]
    store = ResultStore(out)
    assert len(store) == 1
    (rows,) = store._db.execute("SELECT COUNT(*) FROM records").fetchone()
    assert rows == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_cuda_on_a_machine_without_it_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(DeviceUnavailable, match="torch sees no CUDA device"):
        run_evaluations(plan_items([MLP]), compiler="eager", device="cuda", out_dir=tmp_path)
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a child that cannot use CUDA")
def test_a_device_the_children_cannot_use_stops_the_run_before_any_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parent believes in a GPU, its evaluation children cannot use it (as when the
    # forkserver touched CUDA before forking): the run stops, instead of recording every
    # sample as broken.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(DeviceUnavailable, match=r"an evaluation child cannot use cuda:0: .*CUDA"):
        run_evaluations(plan_items([MLP]), compiler="eager", device="cuda", out_dir=tmp_path)
    results = tmp_path / "results.jsonl"
    assert not results.exists() or read_records(results) == []


def test_probe_device_answers_for_the_children() -> None:
    assert probe_device("cpu") is None
    if not torch.cuda.is_available():
        assert "CUDA" in (probe_device("cuda") or "")


def test_a_cuda_only_compiler_on_cpu_is_refused_up_front() -> None:
    with pytest.raises(DeviceUnavailable, match="'cudagraphs' needs a CUDA device"):
        check_device("cudagraphs", "cpu")
    check_device("eager", "cpu")  # fine


def test_a_folder_with_sample_files_but_no_model_is_a_sample_error_record(
    tmp_path: Path, fast: EvalSettings
) -> None:
    # Found by the recursive search it is evaluated like any broken sample: a
    # categorized record naming the missing file, next to the good sample's.
    broken = _copy(MLP, tmp_path / "set" / "broken")
    (broken / "model.py").unlink()
    only_inputs = tmp_path / "set" / "only_inputs"
    only_inputs.mkdir()
    shutil.copy(MLP / "input_meta.py", only_inputs)
    _copy(MLP, tmp_path / "set" / "fine")
    found = find_samples([tmp_path / "set"])
    assert [p.name for p in found] == ["broken", "fine", "only_inputs"]
    run = run_evaluations(
        plan_items([tmp_path / "set"]),
        compiler="eager",
        settings=fast,
        out_dir=tmp_path / "o",
        echo_logs=False,
    )
    by_graph = {r.graph: r for r in run.records}
    assert by_graph["fine"].status is Status.OK
    for name in ("broken", "only_inputs"):
        assert by_graph[name].status is Status.SAMPLE_ERROR
        assert by_graph[name].error is not None
        assert by_graph[name].error.message == "missing file model.py"
    # Given directly, the broken folder is an error of the command.
    with pytest.raises(InputFormatError, match="has weight_meta.py but no model.py") as err:
        find_samples([broken])
    assert err.value.context["file"] == str(broken / "model.py")


def test_missing_optional_files_are_named_with_what_stands_in_for_them(
    tmp_path: Path, fast: EvalSettings, caplog: pytest.LogCaptureFixture
) -> None:
    sample = _copy(MLP, tmp_path / "mlp")
    (sample / "graph_hash.txt").unlink()
    (sample / "input_tensor_constraints.py").unlink()
    with caplog.at_level(logging.WARNING):
        summary = run_evaluations(
            plan_items([sample]), compiler="eager", out_dir=tmp_path / "out", settings=fast
        )
    assert [r.status for r in summary.records] == [Status.OK]
    assert (
        "input_tensor_constraints.py (inputs are replayed without constraints); "
        "graph_hash.txt (the graph hash is that of model.py)" in caplog.text
    )


def test_echoed_log_lines_are_not_wrapped_when_the_console_is_narrow(
    tmp_path: Path, fast: EvalSettings
) -> None:
    import io

    from rich.console import Console

    from passnet.record import parse_log

    out = io.StringIO()
    console = Console(file=out, width=40, force_terminal=False)
    run_evaluations(
        plan_items([MLP]), compiler="eager", settings=fast, out_dir=tmp_path, console=console
    )
    echoed = [line for line in out.getvalue().splitlines() if "[passnet] meta: " in line]
    assert len(echoed) == 1 and len(echoed[0]) > 40
    # what `entry.sh >> LOG` collects parses like eval.log
    (record,) = parse_log(
        "\n".join(x for x in out.getvalue().splitlines() if not x.startswith("eager on"))
    )
    assert record.graph.endswith("sadhaklal_mlp-iris")


def test_labels_do_not_depend_on_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = _copy(MLP, tmp_path / "s" / "mlp")
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "l.txt").write_text("../s/mlp\n")
    monkeypatch.chdir(sample)
    assert [i.label for i in plan_items(["."])] == ["mlp"]
    monkeypatch.chdir(tmp_path)
    from_here = [i.label for i in plan_items(["lists/l.txt"])]
    monkeypatch.chdir("/")
    assert [i.label for i in plan_items([tmp_path / "lists" / "l.txt"])] == from_here


def test_linked_folders_are_searched_once_each_and_a_cycle_ends(
    tmp_path: Path, fast: EvalSettings
) -> None:
    outside = _copy(MLP, tmp_path / "elsewhere" / "mlp")
    tree = tmp_path / "set"
    bert = _copy(BERT, tree / "real" / "bert")
    os.symlink(outside.parent, tree / "link1")  # samples outside the folder, through a link
    os.symlink(outside.parent, tree / "link2")  # ... and a second way to the same samples
    os.symlink(bert, tree / "again")  # a link to a sample found under its own path too
    os.symlink(tree, tree / "real" / "loop")  # a cycle: a link to an ancestor
    os.symlink(tmp_path / "nowhere", tree / "dangling")
    assert find_samples([tree]) == [tree / "link1" / "mlp", bert]
    items = plan_items([tree])
    # labels keep the link (the path inside what was asked for), each real sample once
    assert [i.label for i in items] == ["link1/mlp", "real/bert"]
    run = run_evaluations(items, compiler="eager", settings=fast, out_dir=tmp_path / "o")
    assert sorted(r.graph for r in read_records(tmp_path / "o" / "results.jsonl")) == [
        "link1/mlp",
        "real/bert",
    ]
    assert run.evaluated == 2


def test_a_link_to_a_folder_holding_the_searched_one_is_not_followed(tmp_path: Path) -> None:
    tree = tmp_path / "set"
    inside = _copy(MLP, tree / "a")
    _copy(BERT, tmp_path / "other" / "b")  # beside the searched folder, not in it
    os.symlink("..", tree / "up")  # the searched folder's parent
    os.symlink(".", tree / "here")  # the searched folder itself
    assert find_samples([tree]) == [inside]


def test_a_list_of_samples_that_includes_itself_is_named(tmp_path: Path) -> None:
    task = tmp_path / "task"
    _copy(MLP, task / "mlp")
    (task / "graph_list.txt").write_text("mlp\n.\n")
    with pytest.raises(InputFormatError, match="includes itself"):
        find_samples([task])


def test_new_samples_with_other_settings_do_not_mix_into_a_folder(
    tmp_path: Path, fast: EvalSettings
) -> None:
    run_evaluations(
        plan_items([MLP]), compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False
    )
    other = dataclasses.replace(fast, seed=7)
    with pytest.raises(StoreError, match="seed 0 there, 7 now"):
        run_evaluations(
            plan_items([BERT]), compiler="eager", settings=other, out_dir=tmp_path, echo_logs=False
        )


def test_a_sample_edited_after_its_evaluation_is_evaluated_again(
    tmp_path: Path, fast: EvalSettings
) -> None:
    # graph_hash.txt names the graph and stays as it is when model.py is repaired
    sample = _copy(MLP, tmp_path / "mlp")
    model = sample / "model.py"
    good = model.read_text()
    model.write_text(good.replace("def forward(", "def forward(self_is_broken, ", 1))
    out = tmp_path / "out"
    first = run_evaluations(
        plan_items([sample]), compiler="eager", settings=fast, out_dir=out, echo_logs=False
    )
    assert [r.status for r in first.records] == [Status.SAMPLE_ERROR]
    model.write_text(good)
    second = run_evaluations(
        plan_items([sample]), compiler="eager", settings=fast, out_dir=out, echo_logs=False
    )
    assert second.evaluated == 1 and [r.status for r in second.records] == [Status.OK]
    assert [r.status for r in read_records(out / "results.jsonl")] == [Status.OK]
    third = run_evaluations(
        plan_items([sample]), compiler="eager", settings=fast, out_dir=out, echo_logs=False
    )
    assert third.resumed == 1 and third.evaluated == 0


def test_profile_calls_is_compared_only_where_both_profiled() -> None:
    def settings(**kw: Any) -> dict[str, Any]:
        return EvalSettings(**kw).to_dict()

    assert (
        _settings_differences(settings(profile_calls=5), settings(profile_calls=50), "cuda") == []
    )
    assert _settings_differences(
        settings(profile_kernels=True, profile_calls=5),
        settings(profile_kernels=True, profile_calls=50),
        "cuda",
    ) == ["profile_calls 5 there, 50 now"]
    assert _settings_differences(
        settings(profile_kernels=True, profile_calls=5), settings(profile_calls=50), "cuda"
    ) == ["profile_kernels True there, False now"]


def test_core_guard_is_compared_only_for_cuda_evaluations() -> None:
    new = ("core_guard", "host_wait_s")
    older = {k: v for k, v in EvalSettings().to_dict().items() if k not in new}
    now = EvalSettings().to_dict()
    # a CUDA record from before the guard was measured on one fixed core, without waiting
    assert _settings_differences(older, now, "cuda:0") == ["core_guard False there, True now"]
    unguarded = EvalSettings(core_guard=False, host_wait_s=0.0).to_dict()
    assert _settings_differences(older, unguarded, "cuda") == []
    # the wait belongs to the guard: without it at both ends, its value does not matter
    assert _settings_differences(unguarded, EvalSettings(core_guard=False).to_dict(), "cuda") == []
    assert _settings_differences(EvalSettings(host_wait_s=0.5).to_dict(), now, "cuda") == [
        "host_wait_s 0.5 there, 2.0 now"
    ]
    # on the CPU neither the guard nor pinning does anything
    assert _settings_differences(older, now, "cpu") == []
    unpinned = EvalSettings(pin_cpu=False).to_dict()
    assert _settings_differences(now, unpinned, "cpu") == []
    assert _settings_differences(now, unpinned, "cuda") == ["pin_cpu True there, False now"]


def test_a_list_of_absolute_paths_names_graphs_as_a_search_of_their_folder_does(
    tmp_path: Path,
) -> None:
    searched = {i.label for i in plan_items([DEV])}
    listed = tmp_path / "some.txt"
    picks = ["torchvision/resnet18", "timm/resnet10t.c3_in1k", "torchgeometric/GAE"]
    listed.write_text("".join(f"{DEV / p}\n" for p in picks))
    labels = [i.label for i in plan_items([listed])]
    assert sorted(labels) == sorted(picks)
    assert set(labels) <= searched  # the two runs line up graph by graph
    assert not any(".." in label or label.startswith("/") for label in labels)


def test_planning_loads_only_samples_the_folder_has_records_of(
    tmp_path: Path, fast: EvalSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Resuming checks a recorded sample's hash, which needs the sample loaded; a sample the
    # folder has no record of is simply to do. Loading every sample of a 2,454-sample
    # corpus first took more than ten minutes before the first evaluation started.
    import passnet.runner._run as run_module

    items = plan_items([MLP, BERT])
    run_evaluations(items[:1], compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False)
    loaded: list[str] = []
    real_load = run_module.load_sample

    def counting_load(path: Any) -> Any:
        loaded.append(Path(path).name)
        return real_load(path)

    monkeypatch.setattr(run_module, "load_sample", counting_load)
    store = ResultStore(tmp_path)
    try:
        todo, done = run_module._pending(store, items, "eager", {}, "cpu", fast)
    finally:
        store.close()
    assert [i.label for i in todo] == [items[1].label]
    assert [r.graph for r in done] == [items[0].label]
    assert loaded == [items[0].path.name]  # the recorded one only
