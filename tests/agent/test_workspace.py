"""The file editor works on the episode's private pass_dir and refuses everything outside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from passnet.agent import ToolError, Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    source = tmp_path / "task" / "pass_dir"
    source.mkdir(parents=True)
    (source / "sorted_output_pass_rule_names.json").write_text("[]")
    (source / "Keep.py").write_text("a = 1\nb = 2\nc = 3\n")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "Keep.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "secret.py").write_text("SECRET = 1\n")
    os.symlink(tmp_path / "secret.py", source / "link.py")
    return Workspace.copy_of(source, tmp_path / "episode" / "pass_dir")


def test_the_copy_holds_the_regular_files_only_and_the_task_is_never_written(ws, tmp_path):
    assert set(ws.files()) == {"Keep.py", "sorted_output_pass_rule_names.json"}
    ws.create("Keep.py", "changed\n")
    assert (tmp_path / "task" / "pass_dir" / "Keep.py").read_text() == "a = 1\nb = 2\nc = 3\n"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd", "absolute path"),
        ("~/x.py", "absolute path"),
        ("../secret.py", "'..'"),
        ("pass_dir/../../secret.py", "'..'"),
        ("sub/../../x.py", "'..'"),
        (".hidden.py", "not a plain file name"),
        ("a\\b.py", "backslash"),
    ],
)
def test_paths_outside_pass_dir_are_refused_with_what_to_give_instead(ws, path, why):
    for attempt in (lambda: ws.create(path, "x"), lambda: ws.view(path)):
        with pytest.raises(ToolError, match="refused") as info:
            attempt()
        assert why in str(info.value) and "relative to pass_dir" in str(info.value)


def test_a_symbolic_link_inside_the_workspace_is_refused(ws, tmp_path):
    os.symlink(tmp_path / "secret.py", ws.root / "planted.py")
    with pytest.raises(ToolError, match="symbolic link"):
        ws.view("planted.py")
    os.symlink(tmp_path, ws.root / "outdir")
    with pytest.raises(ToolError, match="symbolic link"):
        ws.create("outdir/x.py", "x")
    assert not (tmp_path / "x.py").exists()


def test_view_lists_the_folder_and_numbers_a_files_lines(ws):
    assert "Keep.py" in ws.view(".") and "Keep.py" in ws.view("pass_dir")
    assert ws.view("Keep.py", [2, 3]) == "     2\tb = 2\n     3\tc = 3"
    with pytest.raises(ToolError, match="does not exist"):
        ws.view("Missing.py")


def test_str_replace_needs_exactly_one_occurrence(ws):
    ws.create("Dup.py", "x = 1\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        ws.str_replace("Dup.py", "x = 1", "y")
    with pytest.raises(ToolError, match="does not occur"):
        ws.str_replace("Keep.py", "zzz", "y")
    out = ws.str_replace("Keep.py", "b = 2", "b = 20")
    assert "b = 20" in out and (ws.root / "Keep.py").read_text() == "a = 1\nb = 20\nc = 3\n"


def test_insert_and_undo_edit_walk_back_each_edit_and_a_creation(ws):
    ws.insert("Keep.py", 0, "import math")
    ws.insert("Keep.py", 4, "d = 4")
    assert (ws.root / "Keep.py").read_text() == "import math\na = 1\nb = 2\nc = 3\nd = 4\n"
    with pytest.raises(ToolError, match="between 0 and 5"):
        ws.insert("Keep.py", 9, "x")
    ws.undo_edit("Keep.py")
    ws.undo_edit("Keep.py")
    assert (ws.root / "Keep.py").read_text() == "a = 1\nb = 2\nc = 3\n"
    with pytest.raises(ToolError, match="no edit"):
        ws.undo_edit("Keep.py")
    ws.create("New.py", "x = 1\n")
    assert "gone" in ws.undo_edit("New.py") and not (ws.root / "New.py").exists()


def test_restore_makes_the_workspace_hold_exactly_a_snapshot(ws):
    snapshot = ws.files()
    ws.create("Extra.py", "x\n")
    ws.create("Keep.py", "y\n")
    ws.restore(snapshot)
    assert ws.files() == snapshot
