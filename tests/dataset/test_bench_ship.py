"""The shipped benchmark: verify a folder against its manifest, pack the evaluation splits
deterministically, unpack the shipped archive once into the cache (bench_path)."""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import shutil
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

import passnet.data
from passnet.data import _shipped
from passnet.dataset import (
    BENCH_SPLITS,
    CACHE_DIR_ENV,
    EVAL_SPLITS,
    _bench_ship,
    bench_path,
    cache_dir,
    manifest_bytes,
    pack_bench,
    read_bench_manifest,
    verify_bench,
)
from passnet.errors import DatasetError
from tests.dataset.bench_tree import SPLIT_TASKS, VERSION, make_bench, write_manifest

EVAL_TASK = "eval-fusible/add_relu-0a1b2c3d4e"
MODEL = f"{EVAL_TASK}/graphs/float32/0x0/g0_3d4e/model.py"


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    root = tmp_path / "bench"
    make_bench(root)
    return root


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _edit_manifest(root: Path, edit: Any) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    edit(manifest)
    write_manifest(root, manifest)


# --------------------------------------------------------------------------- verify


def test_a_built_folder_verifies(bench: Path) -> None:
    result = verify_bench(bench)
    manifest = json.loads((bench / "manifest.json").read_text())
    assert result.ok and result.intact, result.summary()
    assert result.checked == len(manifest["files"]) > 0
    assert result.present == list(SPLIT_TASKS) and result.absent == []
    assert (result.missing, result.changed, result.extra, result.manifest_errors) == (
        [],
        [],
        [],
        [],
    )
    assert [s.matched for s in result.splits] == [s.files for s in result.splits]
    assert (result.name, result.version) == ("passbench-gn", VERSION)


def test_a_changed_file_is_named_with_both_hashes(bench: Path) -> None:
    expected = _sha(bench / MODEL)
    (bench / MODEL).write_text("class GraphModule: ...  # edited\n")
    result = verify_bench(bench)
    assert not result.ok and not result.intact
    assert len(result.changed) == 1
    changed = result.changed[0]
    assert (changed.path, changed.expected, changed.actual) == (
        MODEL,
        expected,
        _sha(bench / MODEL),
    )
    assert result.missing == [] and result.extra == []
    # the task's own checks are skipped for a task whose files already differ
    assert result.manifest_errors == []
    split = next(s for s in result.splits if s.name == "eval-fusible")
    assert (split.changed, split.matched) == (1, split.files - 1)


def test_a_missing_file_is_missing(bench: Path) -> None:
    (bench / MODEL).unlink()
    result = verify_bench(bench)
    assert result.missing == [MODEL] and not result.ok
    assert result.checked == sum(s.files for s in result.splits) - 1


def test_extra_files_in_a_split_and_at_the_top(bench: Path) -> None:
    (bench / EVAL_TASK / "aggregated_score.inductor.json").write_text("{}")
    (bench / "notes.txt").write_text("x")
    (bench / "scratch").mkdir()
    result = verify_bench(bench)
    assert result.extra == [
        f"{EVAL_TASK}/aggregated_score.inductor.json",
        "notes.txt",
        "scratch/",
    ]
    assert result.intact and not result.ok  # every listed file is right; extras are not
    # restricted to splits, the top of the folder is not looked at
    assert verify_bench(bench, splits=["eval-classical"]).ok


def test_absent_splits_are_absent_not_missing(bench: Path) -> None:
    for split in ("train-fusible", "train-classical", "single-op"):
        shutil.rmtree(bench / split)
    result = verify_bench(bench)
    assert result.ok, result.summary()
    assert result.missing == []
    assert result.present == list(EVAL_SPLITS)
    assert result.absent == ["train-fusible", "train-classical", "single-op"]
    manifest = json.loads((bench / "manifest.json").read_text())
    train = [p for p in manifest["files"] if not p.startswith("eval-")]
    assert result.absent_files == len(train) and result.checked == len(manifest["files"]) - len(
        train
    )
    assert "absent splits: train-fusible, train-classical, single-op" in result.summary()
    # a split asked for must be there
    asked = verify_bench(bench, splits=["eval-fusible", "train-fusible"])
    assert asked.intact and not asked.ok
    assert asked.absent == ["train-fusible"]


def test_no_split_present_is_not_ok(tmp_path: Path, bench: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = verify_bench(empty, manifest=bench / "manifest.json")
    assert not result.ok and result.present == [] and result.checked == 0


def test_unknown_split_lists_the_manifests(bench: Path) -> None:
    with pytest.raises(
        DatasetError, match="unknown split eval: the manifest's splits are eval-fusible, "
    ):
        verify_bench(bench, splits=["eval"])


def test_not_a_folder_or_no_manifest_raise(tmp_path: Path, bench: Path) -> None:
    with pytest.raises(DatasetError, match="not a benchmark folder"):
        verify_bench(tmp_path / "nowhere")
    (bench / "manifest.json").unlink()
    with pytest.raises(DatasetError, match="no manifest: .*manifest.json is not a file"):
        verify_bench(bench)


def test_unreadable_manifest_names_file_line_and_field(bench: Path) -> None:
    (bench / "manifest.json").write_text('{"schema_version": 2,\n "name": }')
    with pytest.raises(DatasetError, match="invalid JSON") as info:
        verify_bench(bench)
    assert info.value.context["line"] == "2"
    assert info.value.context["file"].endswith("manifest.json")

    make_bench(bench.parent / "b1")
    _edit_manifest(bench.parent / "b1", lambda m: m.update(schema_version=1))
    with pytest.raises(
        DatasetError, match="schema_version 1 is not one this passnet reads"
    ) as info:
        verify_bench(bench.parent / "b1")
    assert info.value.context["field"] == "schema_version"

    make_bench(bench.parent / "b2")
    _edit_manifest(bench.parent / "b2", lambda m: m.update(version="../../etc"))
    with pytest.raises(DatasetError, match="version must be a non-empty string") as info:
        verify_bench(bench.parent / "b2")
    assert info.value.context["field"] == "version"

    make_bench(bench.parent / "b3")
    _edit_manifest(bench.parent / "b3", lambda m: m.pop("files"))
    with pytest.raises(DatasetError, match="files must be an object"):
        verify_bench(bench.parent / "b3")


def test_inconsistent_counts_are_precise_manifest_errors(bench: Path) -> None:
    def edit(m: dict[str, Any]) -> None:
        m["splits"]["eval-fusible"]["tasks"] = 3
        m["splits"]["eval-classical"]["graphs"] = 7
        m["splits"]["single-op"]["bytes"] += 1

    _edit_manifest(bench, edit)
    result = verify_bench(bench)
    assert not result.ok and not result.intact
    assert result.manifest_errors == [
        "manifest.json: splits.eval-fusible.tasks: 3, but files lists 2 task folders of eval-fusible",
        "manifest.json: splits.eval-fusible.tasks: 3, but tasks has 2 tasks of split eval-fusible",
        "manifest.json: splits.eval-classical.graphs: 7, but the tasks of eval-classical hold 2 graphs",
        f"manifest.json: splits.single-op.bytes: "
        f"{json.loads((bench / 'manifest.json').read_text())['splits']['single-op']['bytes']}, "
        f"but the {result.splits[-1].files} files of single-op hold "
        f"{json.loads((bench / 'manifest.json').read_text())['splits']['single-op']['bytes'] - 1} bytes",
    ]
    assert result.missing == [] and result.changed == []


def test_a_task_json_that_disagrees_with_the_manifest(bench: Path) -> None:
    def edit(m: dict[str, Any]) -> None:
        m["tasks"][0]["graphs"][1]["graph_hash"] = "f" * 64

    _edit_manifest(bench, edit)
    actual = json.loads((bench / EVAL_TASK / "task.json").read_text())["graphs"][1]["graph_hash"]
    result = verify_bench(bench)
    assert result.manifest_errors == [
        f"{EVAL_TASK}/task.json: graphs[1].graph_hash is {actual!r}, "
        f"manifest.json tasks[0].graphs[1].graph_hash is {'f' * 64!r}"
    ]


def test_malformed_entries_are_listed_and_the_rest_checked(bench: Path) -> None:
    def edit(m: dict[str, Any]) -> None:
        m["files"]["../outside.txt"] = "0" * 64
        m["files"][MODEL] = "not-a-hash"
        m["files"]["manifest.json"] = "0" * 64
        m["tasks"][1]["split"] = "eval"

    _edit_manifest(bench, edit)
    result = verify_bench(bench)
    errors = result.manifest_errors
    assert (
        "manifest.json: files['../outside.txt']: must be a relative POSIX path "
        "(<split>/<task>/<file>) without . or .." in errors
    )
    assert (
        f"manifest.json: files[{MODEL!r}]: must be a sha256 in lower-case hex (64 digits), got 'not-a-hash'"
        in errors
    )
    assert "manifest.json: files['manifest.json']: the manifest does not list itself" in errors
    assert any(
        e.startswith("manifest.json: tasks[1].split: 'eval' is not in splits") for e in errors
    )
    # the malformed hash's file is then unlisted: extra, not silently accepted
    assert MODEL in result.extra
    assert not result.ok


def test_files_outside_the_splits_are_checked_with_every_split(bench: Path) -> None:
    (bench / "README.md").write_text("PassBench-GN\n")
    (bench / "notes").mkdir()
    (bench / "notes" / "build.txt").write_text("built\n")
    (bench / "notes" / "mine.txt").write_text("not listed\n")

    def edit(m: dict[str, Any]) -> None:
        m["files"]["README.md"] = _sha(bench / "README.md")
        m["files"]["notes/build.txt"] = _sha(bench / "notes" / "build.txt")
        m["files"]["notes/gone.txt"] = "0" * 64

    _edit_manifest(bench, edit)
    result = verify_bench(bench)
    assert result.missing == ["notes/gone.txt"] and result.extra == ["notes/mine.txt"]
    assert result.manifest_errors == [] and result.changed == []
    (bench / "README.md").write_text("edited\n")
    assert [c.path for c in verify_bench(bench).changed] == ["README.md"]
    # a check of some splits does not look outside them
    assert verify_bench(bench, splits=["eval-fusible"]).ok


def test_a_rebuilt_split_against_the_shipped_manifest(tmp_path: Path, bench: Path) -> None:
    rebuilt = tmp_path / "rebuilt"
    make_bench(rebuilt)  # the same inputs: the same files
    for split in ("eval-fusible", "eval-classical", "single-op"):
        shutil.rmtree(rebuilt / split)
    (rebuilt / "manifest.json").write_text("{}")  # its own manifest is not what is checked
    shipped = bench / "manifest.json"
    result = verify_bench(rebuilt, manifest=shipped, splits=["train-fusible", "train-classical"])
    assert result.ok, result.summary()
    assert result.present == ["train-fusible", "train-classical"]
    # a rebuild that differs
    model = next((rebuilt / "train-fusible").rglob("model.py"))
    model.write_text(model.read_text() + "# not the same\n")
    result = verify_bench(rebuilt, manifest=shipped, splits=["train-fusible"])
    assert [c.path for c in result.changed] == [model.relative_to(rebuilt).as_posix()]


# --------------------------------------------------------------------------- pack


def test_pack_is_deterministic(tmp_path: Path, bench: Path) -> None:
    first = pack_bench(bench, tmp_path / "a")
    # other times, modes of non-executables and umask do not matter
    for f in bench.rglob("*"):
        os.utime(f, (1_700_000_000, 1_700_000_000))
    (bench / MODEL).chmod(0o600)
    second = pack_bench(bench, tmp_path / "b")
    assert first.name == second.name == f"passbench-gn-{VERSION}.tar.xz"
    assert first.read_bytes() == second.read_bytes()
    shipped = tmp_path / "a" / "manifest.json.xz"  # compressed: it lists every split's files
    assert manifest_bytes(shipped) == (bench / "manifest.json").read_bytes()
    assert shipped.read_bytes() == (tmp_path / "b" / "manifest.json.xz").read_bytes()
    with tarfile.open(first) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names, key=lambda n: n.split("/"))
    assert names[0] == "eval-classical" and "manifest.json" in names
    assert {n.split("/")[0] for n in names} == {"eval-classical", "eval-fusible", "manifest.json"}
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members)
    assert all(m.uname == "" and m.gname == "" for m in members)
    modes = {m.name.rsplit("/", 1)[-1]: m.mode for m in members if m.isfile()}
    assert modes["entry.sh"] == 0o755 and modes["model.py"] == 0o644
    assert all(m.mode == 0o755 for m in members if m.isdir())


def test_pack_refuses_a_folder_that_does_not_verify(tmp_path: Path, bench: Path) -> None:
    (bench / EVAL_TASK / "stray.py").write_text("")
    with pytest.raises(DatasetError, match="does not match its manifest .*1 extra.*stray.py"):
        pack_bench(bench, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    shutil.rmtree(bench / "eval-classical")
    (bench / EVAL_TASK / "stray.py").unlink()
    with pytest.raises(DatasetError, match="absent splits: eval-classical"):
        pack_bench(bench, tmp_path / "out")


# --------------------------------------------------------------------------- bench_path


@pytest.fixture
def shipped(tmp_path: Path, bench: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package's passbench folder, holding a packed tiny benchmark; the cache in tmp."""
    folder = tmp_path / "package" / "passbench"
    pack_bench(bench, folder)
    monkeypatch.setattr(passnet.data, "passbench_dir", lambda: folder)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return folder


def _count_unpacks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = _bench_ship._unpack

    def counting(archive: Path, m: Any, target: Path, digests: Any) -> None:
        calls.append(target)
        real(archive, m, target, digests)

    monkeypatch.setattr(_bench_ship, "_unpack", counting)
    return calls


def test_bench_path_unpacks_once(
    tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unpacks = _count_unpacks(monkeypatch)
    folder = bench_path()
    assert folder == tmp_path / "cache" / f"passbench-gn-{VERSION}"
    assert sorted(p.name for p in folder.iterdir()) == [
        "eval-classical",
        "eval-fusible",
        "manifest.json",
    ]
    assert verify_bench(folder).ok
    assert oct(folder.stat().st_mode & 0o777) == oct(0o755)
    assert bench_path("eval-fusible") == folder / "eval-fusible"
    assert unpacks == [folder]
    # nothing left beside it but the lock and the record of the splits unpacked
    assert sorted(p.name for p in folder.parent.iterdir()) == [
        f".passbench-gn-{VERSION}.lock",
        f".passbench-gn-{VERSION}.unpacked.json",
        f"passbench-gn-{VERSION}",
    ]
    stamp = json.loads((folder.parent / f".passbench-gn-{VERSION}.unpacked.json").read_text())
    assert stamp["schema_version"] == 1 and stamp["splits"] == ["eval-fusible", "eval-classical"]
    assert stamp["archive_sha256"] == _sha(shipped / f"passbench-gn-{VERSION}.tar.xz")
    assert stamp["manifest_sha256"] == _sha(shipped / "manifest.json.xz")
    assert (
        stamp["files"][0] == "manifest.json"
        and len(stamp["files"])
        == 1
        + sum(2 * 5 for _ in SPLIT_TASKS["eval-fusible"] + SPLIT_TASKS["eval-classical"])
        + 3 * 4
    )  # each task: two graphs of five files; task.json, list, entry, pass manifest


def _count_hashing(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Path], list[Path]]:
    """The files hashed (``file_sha256``) and the folders verified (``verify_bench``)."""
    hashed: list[Path] = []
    verified: list[Path] = []
    real_hash, real_verify = _bench_ship.file_sha256, _bench_ship.verify_bench

    def hashing(path: Any) -> str:
        hashed.append(Path(path))
        return real_hash(path)

    def verifying(path: Any, manifest: Any = None, splits: Any = None) -> Any:
        verified.append(Path(path))
        return real_verify(path, manifest, splits)

    for module in (_bench_ship, _shipped):  # the full check, and the stamp's
        monkeypatch.setattr(module, "file_sha256", hashing)
    monkeypatch.setattr(_bench_ship, "verify_bench", verifying)
    return hashed, verified


def test_a_later_call_compares_stats_and_hashes_no_cached_file(
    shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = bench_path()
    hashed, verified = _count_hashing(monkeypatch)
    read = []
    monkeypatch.setattr(_bench_ship, "read_bench_manifest", lambda p: read.append(p))
    assert bench_path() == folder and bench_path("eval-classical") == folder / "eval-classical"
    # the shipped archive and manifest only (whether they changed): no cached file
    assert all(p.parent == shipped for p in hashed) and len(hashed) == 4
    assert verified == [] and read == []


def test_a_touched_file_is_checked_in_full_and_the_copy_kept(
    shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = bench_path()
    unpacks = _count_unpacks(monkeypatch)
    hashed, verified = _count_hashing(monkeypatch)
    st = (folder / MODEL).stat()
    os.utime(folder / MODEL, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same bytes
    assert bench_path() == folder
    assert verified == [folder] and unpacks == [] and folder / MODEL in hashed
    verified.clear()
    assert bench_path() == folder and verified == []  # stamped again after the check


@pytest.mark.parametrize("change", ["same size", "deleted", "split removed"])
def test_a_changed_or_deleted_file_is_found_and_repaired(
    shipped: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    folder = bench_path()
    model = folder / MODEL
    good = model.read_bytes()
    unpacks = _count_unpacks(monkeypatch)
    _, verified = _count_hashing(monkeypatch)
    if change == "same size":
        st = model.stat()
        model.write_bytes(bytes(b ^ 1 for b in good))
        os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    elif change == "deleted":
        model.unlink()
    else:
        shutil.rmtree(folder / "eval-fusible")
    assert bench_path() == folder
    assert verified[0] == folder and unpacks == [folder] and model.read_bytes() == good
    assert verify_bench(folder).ok


@pytest.mark.parametrize("stamp", ["{not json", '{"splits": ["eval-fusible"]}', "", None])
def test_a_corrupt_or_missing_stamp_means_a_full_check(
    shipped: Path, monkeypatch: pytest.MonkeyPatch, stamp: str | None
) -> None:
    folder = bench_path()
    path = folder.parent / f".passbench-gn-{VERSION}.unpacked.json"
    written = path.read_text()
    if stamp is None:
        path.unlink()
    else:
        path.write_text(stamp)
    unpacks = _count_unpacks(monkeypatch)
    _, verified = _count_hashing(monkeypatch)
    assert bench_path("eval-fusible") == folder / "eval-fusible"
    assert verified == [folder] and unpacks == []  # intact: kept, and stamped again
    assert json.loads(path.read_text())["stats_sha256"] == json.loads(written)["stats_sha256"]


def test_another_shipped_archive_is_unpacked_again(
    shipped: Path, bench: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = bench_path()
    rebuilt = (bench / MODEL).read_text().upper()  # the same size: the counts still hold
    (bench / MODEL).write_text(rebuilt)
    _edit_manifest(bench, lambda m: m["files"].update({MODEL: _sha(bench / MODEL)}))
    pack_bench(bench, shipped)  # the same version, other bytes
    unpacks = _count_unpacks(monkeypatch)
    assert bench_path() == folder and unpacks == [folder]
    assert (folder / MODEL).read_text() == rebuilt


def test_a_corrupted_cache_is_unpacked_again(
    shipped: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = bench_path()
    model = folder / MODEL
    good = model.read_bytes()
    unpacks = _count_unpacks(monkeypatch)
    # a score written into a task is the user's: not a corruption
    (folder / EVAL_TASK / "aggregated_score.inductor.json").write_text("{}")
    assert bench_path() == folder and unpacks == []
    model.write_text("tampered\n")
    with caplog.at_level("WARNING"):
        assert bench_path() == folder
    assert unpacks == [folder] and model.read_bytes() == good
    assert "does not match its manifest" in caplog.text and MODEL in caplog.text
    (folder / "eval-classical").rename(folder.parent / "elsewhere")
    assert bench_path("eval-classical") == folder / "eval-classical"
    assert len(unpacks) == 2 and verify_bench(folder).ok


def test_files_outside_the_splits_ship_too(
    tmp_path: Path, bench: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (bench / "README.md").write_text("PassBench-GN\n")
    _edit_manifest(bench, lambda m: m["files"].update({"README.md": _sha(bench / "README.md")}))
    folder = tmp_path / "package"
    archive = pack_bench(bench, folder, splits=["eval-classical"])
    with tarfile.open(archive) as tar:
        assert {n.split("/")[0] for n in tar.getnames()} == {
            "README.md",
            "eval-classical",
            "manifest.json",
        }
    monkeypatch.setattr(passnet.data, "passbench_dir", lambda: folder)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    assert (bench_path() / "README.md").read_text() == "PassBench-GN\n"
    with pytest.raises(DatasetError, match="split eval-fusible does not ship"):
        bench_path("eval-fusible")


def test_no_half_folder_is_ever_in_place(shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool]] = []
    real = _bench_ship.verify_bench
    target = cache_dir() / f"passbench-gn-{VERSION}"

    def watching(path: Any, manifest: Any = None, splits: Any = None) -> Any:
        seen.append((Path(path).name, target.exists()))
        return real(path, manifest, splits)

    monkeypatch.setattr(_bench_ship, "verify_bench", watching)
    bench_path()
    # the unpacked copy was checked in its temporary folder, before anything was in place
    assert len(seen) == 1 and seen[0][0].startswith(f".passbench-gn-{VERSION}.unpack-")
    assert seen[0][1] is False


def test_concurrent_callers_unpack_once(shipped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unpacks = _count_unpacks(monkeypatch)
    results: list[Path] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            folder = bench_path("eval-fusible")
            assert verify_bench(folder.parent).ok  # whole when returned
            results.append(folder)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results)) == 1 and len(results) == 4
    assert len(unpacks) == 1


def test_leftovers_of_a_killed_unpack_are_removed(shipped: Path) -> None:
    root = cache_dir()
    stale = root / f".passbench-gn-{VERSION}.unpack-x1"
    (stale / "eval-fusible").mkdir(parents=True)
    folder = bench_path()
    assert not stale.exists() and verify_bench(folder).ok


def test_a_broken_archive_leaves_nothing(shipped: Path) -> None:
    archive = shipped / f"passbench-gn-{VERSION}.tar.xz"
    archive.write_bytes(archive.read_bytes()[:200])
    with pytest.raises(DatasetError, match="cannot unpack the shipped benchmark"):
        bench_path()
    assert sorted(p.name for p in cache_dir().iterdir()) == [f".passbench-gn-{VERSION}.lock"]


@pytest.mark.parametrize("kind", ["outside", "symlink"])
def test_an_archive_member_that_is_not_a_plain_file_inside_is_refused(
    tmp_path: Path, shipped: Path, kind: str
) -> None:
    archive = shipped / f"passbench-gn-{VERSION}.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        if kind == "outside":
            info = tarfile.TarInfo("../evil.txt")
            info.size = 4
            tar.addfile(info, io.BytesIO(b"evil"))
        else:
            info = tarfile.TarInfo("eval-fusible")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc"
            tar.addfile(info)
    with pytest.raises(DatasetError, match="is not a plain file or folder inside the archive"):
        bench_path()
    assert not (cache_dir() / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert sorted(p.name for p in cache_dir().iterdir()) == [f".passbench-gn-{VERSION}.lock"]


def test_an_archive_that_does_not_match_the_manifest_is_refused(shipped: Path) -> None:
    packed = shipped / "manifest.json.xz"
    m = json.loads(manifest_bytes(packed))
    m["files"][MODEL] = "0" * 64
    packed.write_bytes(lzma.compress(json.dumps(m, indent=2, sort_keys=True).encode()))
    with pytest.raises(DatasetError, match="does not match the shipped manifest .*reinstall"):
        bench_path()
    assert not (cache_dir() / f"passbench-gn-{VERSION}").exists()


def test_no_shipped_benchmark_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "package" / "passbench"
    monkeypatch.setattr(passnet.data, "passbench_dir", lambda: folder)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    with pytest.raises(DatasetError, match="not in this installation.*passnet bench build"):
        bench_path()
    # a manifest without its archive
    folder.mkdir(parents=True)
    make_bench(tmp_path / "bench")
    (folder / "manifest.json.xz").write_bytes(
        lzma.compress((tmp_path / "bench" / "manifest.json").read_bytes())
    )
    with pytest.raises(
        DatasetError, match=f"its archive passbench-gn-{VERSION}.tar.xz.*passnet bench build"
    ):
        bench_path("eval-fusible")
    assert not (tmp_path / "cache").exists()


def test_the_shipped_benchmark_unpacks_and_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's own archive, once the benchmark ships: every split in its manifest,
    the archive within the repository's limit, the evaluation splits unpacked and intact."""
    folder = passnet.data.passbench_dir()
    manifest = folder / "manifest.json.xz"
    if not manifest.is_file():
        pytest.skip("no benchmark shipped in this checkout")
    m = read_bench_manifest(manifest)
    assert (folder / m.archive_name).is_file()
    assert (folder / m.archive_name).stat().st_size <= 40 * 1000 * 1000
    assert set(m.splits) == set(BENCH_SPLITS)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    result = verify_bench(bench_path(), manifest=manifest)
    assert result.ok and set(EVAL_SPLITS) <= set(result.present), result.summary()


def test_splits_that_are_unknown_or_not_shipped(shipped: Path) -> None:
    with pytest.raises(DatasetError, match="unknown split 'eval': the splits are eval-fusible, "):
        bench_path("eval")
    with pytest.raises(DatasetError, match="split train-fusible does not ship") as info:
        bench_path("train-fusible")
    assert "passnet bench verify DIR --manifest" in str(info.value)


def test_a_cache_folder_that_cannot_be_written(
    tmp_path: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "a-file" / "cache"))
    with pytest.raises(DatasetError, match=f"into the cache folder: .*set {CACHE_DIR_ENV}"):
        bench_path()


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "passnet"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "passnet"
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
