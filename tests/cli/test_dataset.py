"""The dataset commands: extract, validate, hash, dedup, db, decompose, motifs, generalize —
exit codes, outputs, resume."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from rich.console import Console

from passnet.cli._dataset import add_commands
from passnet.dataset import Catalog, DedupReport, read_reports
from tests.conftest import BERT, MLP, SYMINT_HEAD

MODEL_FILE = """
import torch
from torch import nn


def get_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)).eval()


def get_inputs():
    return (torch.randn(3, 4),)
"""


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def run(*argv: str) -> tuple[int, str]:
    """Run one command through the argparse setup the passnet CLI uses; (exit code, output)."""
    parser = argparse.ArgumentParser(prog="passnet")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([str(a) for a in argv])
    out = io.StringIO()
    code = args.func(args, Console(file=out, width=250, color_system=None))
    return int(code or 0), out.getvalue()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for f in dst.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    return dst


@pytest.mark.parametrize(
    "command", ["extract", "validate", "hash", "dedup", "db", "decompose", "motifs", "generalize"]
)
def test_every_command_has_help_with_examples(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        run(command, "--help")
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and f"passnet {command} " in text


def test_extract_writes_samples_catalogues_them_and_resumes(tmp_path: Path) -> None:
    file = tmp_path / "mlp.py"
    file.write_text(MODEL_FILE)
    db = tmp_path / "catalog.sqlite"
    code, out = run(
        "extract", file, "--out", tmp_path / "out", "--catalog", db, "--json", tmp_path / "x.json"
    )
    assert code == 0 and "mlp" in out
    assert (tmp_path / "out" / "mlp" / "model.py").is_file()
    assert json.loads((tmp_path / "x.json").read_text())[0]["ok"] is True
    with Catalog(db) as catalog:
        (record,) = catalog.samples()
        assert record.provenance["tool"] == "passnet extract" and record.source == "passnet.extract"
    code, out = run("extract", file, "--out", tmp_path / "out")
    assert code == 0 and "skipped" in out


def test_extract_reports_a_broken_file_and_continues_with_the_next(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("raise ImportError('no such lib')\n")
    (tmp_path / "good.py").write_text(MODEL_FILE)
    code, out = run("extract", tmp_path / "bad.py", tmp_path / "good.py", "--out", tmp_path / "out")
    assert code == 1
    assert "no such lib" in out and (tmp_path / "out" / "good" / "model.py").is_file()


def test_validate_writes_json_lines_resumes_and_fails_on_a_bad_sample(tmp_path: Path) -> None:
    broken = _copy(MLP, tmp_path / "samples" / "broken")
    (broken / "model.py").write_text(
        (broken / "model.py")
        .read_text()
        .replace("torch.relu(linear)", "torch.relu(linear).view(7, -1)")
    )
    _copy(SYMINT_HEAD, tmp_path / "samples" / "head")
    reports = tmp_path / "v.jsonl"
    db = tmp_path / "c.sqlite"
    code, out = run("validate", tmp_path / "samples", "--out", reports, "--catalog", db)
    assert code == 1
    assert "runnable" in out and "node view" in out and "1 valid, 1 failed" in out
    assert [r.ok for r in read_reports(reports)] == [False, True]
    code, out = run("validate", tmp_path / "samples", "--out", reports)
    assert "resuming: 2 of 2" in out and len(reports.read_text().splitlines()) == 2
    with Catalog(db) as catalog:
        assert dict(catalog.counts("validation")) == {"ok": 1, "sample_error": 1}


def test_hash_prints_full_hashes_and_writes_json(tmp_path: Path) -> None:
    code, out = run("hash", MLP, BERT, "--json", tmp_path / "h.json")
    assert code == 0 and "2 samples, 2 unique hashes, 0 errors" in out
    data = json.loads((tmp_path / "h.json").read_text())
    assert all(d["graph_hash"] in out for d in data)


def test_hash_says_which_hash_is_which(tmp_path: Path) -> None:
    from passnet.sample import load_sample

    code, out = run("hash", MLP, "--json", tmp_path / "h.json")
    (data,) = json.loads((tmp_path / "h.json").read_text())
    recorded = load_sample(MLP).graph_hash  # what an evaluation record's graph_hash is
    assert data["file_hash"] == recorded != data["graph_hash"]
    assert "canonical hash" in out and "graph_hash.txt" in out
    assert recorded in out and "which evaluation records carry as graph_hash" in " ".join(
        out.split()
    )


def test_hash_write_updates_graph_hash_txt(tmp_path: Path) -> None:
    sample = _copy(MLP, tmp_path / "s")
    before = (sample / "graph_hash.txt").read_text()
    code, _ = run("hash", sample, "--write")
    after = (sample / "graph_hash.txt").read_text()
    assert code == 0 and after != before and len(after) == 64


def test_dedup_writes_report_kept_list_and_catalog(tmp_path: Path) -> None:
    _copy(BERT, tmp_path / "s" / "a")
    _copy(BERT, tmp_path / "s" / "b")
    _copy(MLP, tmp_path / "s" / "c")
    db = tmp_path / "c.sqlite"
    code, out = run(
        "dedup",
        tmp_path / "s",
        "--out",
        tmp_path / "d.json",
        "--kept",
        tmp_path / "kept.txt",
        "--catalog",
        db,
    )
    assert code == 0 and "3 samples: 2 unique, 1 duplicates" in out
    assert DedupReport.read(tmp_path / "d.json").duplicates == {
        str(tmp_path / "s" / "b"): str(tmp_path / "s" / "a")
    }
    assert (tmp_path / "kept.txt").read_text().splitlines() == [
        str((tmp_path / "s" / n).resolve()) for n in "ac"
    ]
    with Catalog(db) as catalog:
        assert len(catalog.samples(unique=True)) == 2


def test_db_add_counts_and_find(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    code, _ = run("db", db, "add", MLP, BERT, SYMINT_HEAD)
    assert code == 0
    code, out = run("db", db, "counts", "--by", "source")
    assert code == 0 and "huggingface_hub" in out and "total" in out and " 3 " in out
    code, out = run("db", db, "find", "--ops", "linear,gelu")
    assert code == 0 and "prajjwal1_bert-tiny" in out and "1 samples contain linear → gelu" in out
    code, out = run("db", db, "find", "--ops", "F.linear", "--json")
    found = json.loads(out)
    assert (
        code == 0 and len(found) == 3 and all(r["ops"][r["position"]] == "F.linear" for r in found)
    )


def test_db_query_on_a_missing_catalog_is_an_error(tmp_path: Path) -> None:
    from passnet.errors import StoreError

    with pytest.raises(StoreError, match="does not exist"):
        run("db", tmp_path / "nope.sqlite", "counts")
    assert not (tmp_path / "nope.sqlite").exists()


def test_decompose_help_states_the_library_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from passnet.dataset import DEFAULT_MEMORY_LIMIT_GB, DEFAULT_TIMEOUT_S

    with pytest.raises(SystemExit):
        run("decompose", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {DEFAULT_TIMEOUT_S:.0f})" in text
    assert f"(default: {DEFAULT_MEMORY_LIMIT_GB:g}; 0: no limit)" in text


def test_decompose_chunks_under_a_root_then_motifs_then_classical(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    a = _copy(MLP, corpus / "family_a" / MLP.name)
    b = _copy(MLP, corpus / "family_b" / MLP.name)
    out = tmp_path / "sub"
    code, text = run("decompose", a, "--out", out, "--kind", "single-op", "--root", corpus)
    assert code == 0 and "1 of 1 samples ok" in text
    code, text = run("decompose", b, "--out", out, "--kind", "single-op")  # root from OUT
    assert code == 0
    assert (out / "family_a" / MLP.name / "single-op").is_dir()
    assert (out / "family_b" / MLP.name / "single-op").is_dir()
    code, text = run("motifs", out / "decompose.jsonl", "--out", tmp_path / "motifs.json")
    assert code == 0 and "from 2 samples" in text
    table = json.loads((tmp_path / "motifs.json").read_text())
    assert table["symbols"] and table["sequences"] == sorted([str(a), str(b)])
    code, text = run(
        "decompose",
        corpus,
        "--out",
        tmp_path / "classical",
        "--kind",
        "classical",
        "--motifs",
        tmp_path / "motifs.json",
        "--min-ops",
        "2",
    )
    assert code == 0, text
    assert list((tmp_path / "classical" / "family_a" / MLP.name / "classical").iterdir())


def test_generalize_records_variants_in_the_catalog(tmp_path: Path) -> None:
    code, _ = run("decompose", MLP, "--out", tmp_path / "sub", "--kind", "single-op")
    assert code == 0
    code, text = run(
        "generalize",
        tmp_path / "sub",
        "--out",
        tmp_path / "var",
        "--dtypes",
        "float16",
        "--no-shapes",
        "--catalog",
        tmp_path / "catalog.sqlite",
    )
    assert code == 0, text
    with Catalog(tmp_path / "catalog.sqlite") as catalog:
        assert dict(catalog.counts("kind")) == {"variant": 3}
