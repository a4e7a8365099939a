"""benchmarks/dataset/corpus_pipeline.py reads a list of corpus-relative samples under --root."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "dataset" / "corpus_pipeline.py"


def _module():
    spec = importlib.util.spec_from_file_location("corpus_pipeline", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_relative_lines_are_taken_under_the_root(tmp_path):
    text = "timm/a\n\n# a comment\n  hf/org/b  \n/elsewhere/c\n"
    assert _module().under_root(text, tmp_path / "corpus") == (
        f"{tmp_path}/corpus/timm/a\n{tmp_path}/corpus/hf/org/b\n/elsewhere/c\n"
    )


def test_the_source_set_list_resolves_under_a_corpus_root(tmp_path):
    from passnet.sample import find_samples

    listed = (SCRIPT.parent / "source_set.txt").read_text().split()
    root = tmp_path / "corpus"
    for rel in listed[:3]:
        (root / rel).mkdir(parents=True)
        (root / rel / "model.py").write_text("")
    copy = tmp_path / "run" / "samples.txt"
    copy.parent.mkdir()
    head = "".join(line + "\n" for line in listed[:3])
    copy.write_text(_module().under_root(head, root))
    assert find_samples([copy]) == [root / rel for rel in listed[:3]]
