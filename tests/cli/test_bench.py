"""``passnet bench verify | path | pack``: exit codes and outputs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import passnet.data
import passnet.dataset
from passnet.cli import main
from passnet.cli._bench import SPLITS_TEXT
from passnet.dataset import BENCH_SPLITS, CACHE_DIR_ENV, manifest_bytes
from tests.cli.test_startup import HEAVY
from tests.dataset.bench_tree import VERSION, make_bench

MODEL = "eval-fusible/add_relu-0a1b2c3d4e/graphs/float32/0x0/g0_3d4e/model.py"


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    make_bench(tmp_path / "bench")
    return tmp_path / "bench"


def test_verify_ok(bench: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "verify", str(bench)]) == 0
    out = capsys.readouterr().out
    assert f"passbench-gn {VERSION}" in out
    assert "eval-fusible" in out and "single-op" in out
    files = len(json.loads((bench / "manifest.json").read_text())["files"])
    assert f"ok: {files} files checked" in out


def test_verify_mismatch_lists_the_files_and_exits_1(
    bench: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (bench / MODEL).write_text("changed\n")
    (bench / "eval-classical" / "conv_bn_relu-2c3d4e5f60" / "task.json").unlink()
    (bench / "eval-fusible" / "stray.txt").write_text("")
    assert main(["bench", "verify", str(bench)]) == 1
    out = capsys.readouterr().out
    assert f"changed: {MODEL} (sha256 " in out
    assert "missing: eval-classical/conv_bn_relu-2c3d4e5f60/task.json" in out
    assert "extra: eval-fusible/stray.txt" in out
    assert "MISMATCH:" in out and "1 missing, 1 changed, 1 extra" in out


def test_verify_a_bad_manifest_names_the_field(
    bench: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads((bench / "manifest.json").read_text())
    manifest["splits"]["eval-fusible"]["graphs"] = 5
    (bench / "manifest.json").write_text(json.dumps(manifest))
    assert main(["bench", "verify", str(bench)]) == 1
    assert (
        "manifest: manifest.json: splits.eval-fusible.graphs: 5, but the tasks of eval-fusible "
        "hold 4 graphs" in capsys.readouterr().out
    )
    manifest["schema_version"] = 9
    (bench / "manifest.json").write_text(json.dumps(manifest))
    assert main(["bench", "verify", str(bench)]) == 2
    assert "schema_version 9 is not one this passnet reads" in capsys.readouterr().err


def test_verify_usage_errors_exit_2(
    tmp_path: Path, bench: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["bench", "verify", str(tmp_path / "nowhere")])
    assert info.value.code == 2
    assert "not a folder" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["bench", "verify", str(empty)]) == 2
    assert "no manifest" in capsys.readouterr().err
    assert main(["bench", "verify", str(bench), "--split", "train"]) == 2
    assert "unknown split train" in capsys.readouterr().err


def test_verify_a_rebuilt_split_against_the_shipped_manifest(
    tmp_path: Path, bench: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rebuilt = tmp_path / "rebuilt"
    make_bench(rebuilt)
    shutil.rmtree(rebuilt / "eval-fusible")
    argv = ["bench", "verify", str(rebuilt), "--manifest", str(bench / "manifest.json")]
    assert main([*argv, "--split", "train-fusible"]) == 0
    assert main([*argv, "--split", "eval-fusible"]) == 1  # asked for, absent
    assert "asked for but absent: eval-fusible" in capsys.readouterr().err
    assert main(argv) == 0  # without --split, an absent split is not a mismatch
    assert "absent splits: eval-fusible" in capsys.readouterr().out


def test_pack_then_path(
    tmp_path: Path, bench: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = tmp_path / "package" / "passbench"
    assert main(["bench", "pack", str(bench), "--out", str(shipped)]) == 0
    out = capsys.readouterr().out
    assert (
        f"packed eval-fusible, eval-classical: {shipped / f'passbench-gn-{VERSION}.tar.xz'}" in out
    )
    assert manifest_bytes(shipped / "manifest.json.xz") == (bench / "manifest.json").read_bytes()

    monkeypatch.setattr(passnet.data, "passbench_dir", lambda: shipped)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "cache" / f"passbench-gn-{VERSION}"
    assert main(["bench", "path"]) == 0
    assert capsys.readouterr().out == f"{folder}\n"
    assert main(["bench", "path", "eval-classical"]) == 0
    assert capsys.readouterr().out == f"{folder / 'eval-classical'}\n"
    assert main(["bench", "verify", str(folder)]) == 0
    capsys.readouterr()
    assert main(["bench", "path", "train-fusible"]) == 2
    assert "split train-fusible does not ship with passnet" in capsys.readouterr().err

    # a verified, unchanged copy is answered from its stamp, without passnet.dataset
    def refused(split: object = None) -> None:
        raise AssertionError("bench_path was called")

    monkeypatch.setattr(passnet.dataset, "bench_path", refused)
    assert main(["bench", "path", "eval-fusible"]) == 0
    assert capsys.readouterr().out == f"{folder / 'eval-fusible'}\n"


def test_a_later_path_imports_no_heavy_library(
    tmp_path: Path, bench: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the copy is unpacked and stamped, ``passnet bench path`` answers without
    torch (or any other heavy library): what makes it cheap."""
    shipped = tmp_path / "package" / "passbench"
    assert main(["bench", "pack", str(bench), "--out", str(shipped)]) == 0
    monkeypatch.setattr(passnet.data, "passbench_dir", lambda: shipped)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    assert main(["bench", "path"]) == 0  # unpacks and stamps
    capsys.readouterr()
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import passnet.data\n"
        f"passnet.data.passbench_dir = lambda: Path({str(shipped)!r})\n"
        "from passnet.cli import main\n"
        "assert main(['bench', 'path', 'eval-fusible']) == 0\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    folder = tmp_path / "cache" / f"passbench-gn-{VERSION}"
    assert out.stdout.splitlines() == [str(folder / "eval-fusible"), "[]"]


def test_pack_refuses_a_mismatch_and_takes_splits(
    tmp_path: Path, bench: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (bench / MODEL).write_text("changed\n")
    assert main(["bench", "pack", str(bench), "--out", str(tmp_path / "out")]) == 2
    assert "does not match its manifest" in capsys.readouterr().err
    shutil.rmtree(bench / "eval-fusible")  # a split that is not there is not checked
    assert (
        main(["bench", "pack", str(bench), "--out", str(tmp_path / "out"), "--split", "single-op"])
        == 0
    )
    assert "packed single-op" in capsys.readouterr().out


def test_path_without_a_shipped_benchmark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(passnet.data, "passbench_dir", lambda: tmp_path / "none")
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    assert main(["bench", "path"]) == 2
    err = capsys.readouterr().err
    assert "PassBench-GN is not in this installation" in err and "passnet bench build" in err
    assert main(["bench", "path", "eval"]) == 2
    assert f"the splits are {SPLITS_TEXT}" in capsys.readouterr().err


def test_the_help_names_the_benchmarks_splits() -> None:
    assert SPLITS_TEXT == ", ".join(BENCH_SPLITS)


@pytest.mark.parametrize("command", ["verify", "path", "pack"])
def test_help_shows_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", command, "--help"])
    assert "examples:" in capsys.readouterr().out
