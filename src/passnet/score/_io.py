"""Load evaluation records for scoring; write and read ``aggregated_score.json``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from passnet.errors import InputFormatError
from passnet.record import EvalRecord, parse_log, read_records
from passnet.score._result import ScoreReport

__all__ = [
    "RESULTS_FILE",
    "SCORE_FILE",
    "load_records",
    "read_score",
    "split_by_run",
    "write_score",
]

log = logging.getLogger(__name__)

RESULTS_FILE = "results.jsonl"
"""The records file of a results folder."""
SCORE_FILE = "aggregated_score.json"

_JSONL_SUFFIXES = (".jsonl", ".json")
_LOG_SUFFIXES = (".log", ".txt")


def _looks_like_jsonl(path: Path) -> bool:
    if path.suffix in _JSONL_SUFFIXES:
        return True
    if path.suffix in _LOG_SUFFIXES:
        return False
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                return line.lstrip().startswith("{")
    return False


def _is_score_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "score" in data and "es" in data


def load_records(path: str | Path, *, compiler: str | None = None) -> list[EvalRecord]:
    """Records from a results folder (its ``results.jsonl``), a ``.jsonl`` file or a log file.

    Files are recognized by suffix (``.jsonl``/``.json`` records, ``.log``/``.txt``
    logs), else by content (a first line starting with ``{`` is JSON Lines).
    ``compiler`` names the compiler of a log that does not say.
    """
    path = Path(path)
    if path.is_dir():
        results = path / RESULTS_FILE
        if not results.is_file():
            raise InputFormatError(
                f"results folder has no {RESULTS_FILE}; give the folder written by "
                "`passnet eval`, a .jsonl records file or a PassNet/GraphNet log file",
                file=path,
            )
        return read_records(results)
    if not path.is_file():
        raise InputFormatError("no such results folder, records file or log file", file=path)
    if path.name == "aggregated_score.json" or (path.suffix == ".json" and _is_score_file(path)):
        raise InputFormatError(
            "this is a score (aggregated_score.json), not evaluation records: give the "
            "results folder, its results.jsonl or a log file",
            file=path,
        )
    if _looks_like_jsonl(path):
        return read_records(path)
    return parse_log(path, compiler=compiler)


def split_by_run(records: list[EvalRecord]) -> dict[str, list[EvalRecord]]:
    """Group records by compiler configuration (and device), each group scored on its own.

    Labels are the compiler name, extended with the config hash and the device
    only where needed to tell groups apart.
    """
    groups: dict[tuple[str, str, str], list[EvalRecord]] = {}
    for record in records:
        groups.setdefault((record.compiler, record.compiler_config_hash, record.device), []).append(
            record
        )
    configs: dict[str, set[str]] = {}
    devices: dict[str, set[str]] = {}
    for compiler, config, device in groups:
        configs.setdefault(compiler, set()).add(config)
        devices.setdefault(compiler, set()).add(device)
    labelled: dict[str, list[EvalRecord]] = {}
    for (compiler, config, device), group in groups.items():
        label = compiler
        if len(configs[compiler]) > 1:
            label += f"@{config[:8]}"
        if len(devices[compiler]) > 1:
            label += f"[{device}]"
        labelled[label] = group
    return labelled


def write_score(report: ScoreReport, path: str | Path) -> Path:
    """Write ``aggregated_score.json`` (into ``path`` when it is a folder); returns the file."""
    path = Path(path)
    if path.is_dir():
        path = path / SCORE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report.to_json_dict(), indent=2, allow_nan=False)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_score(path: str | Path) -> ScoreReport:
    """Read an ``aggregated_score.json`` written by :func:`write_score` (file or folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / SCORE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputFormatError(f"cannot read score: {exc.strerror}", file=path) from exc
    except json.JSONDecodeError as exc:
        raise InputFormatError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from exc
    if not isinstance(data, dict):
        raise InputFormatError("an aggregated score must be a JSON object", file=path)
    try:
        return ScoreReport.from_json_dict(data)
    except InputFormatError as exc:
        raise InputFormatError(exc.message, file=path, **exc.context) from exc
