"""Read PassNet/GraphNet evaluation logs into :class:`~passnet.evaluate.EvalRecord` s.

A log holds any number of graph blocks, each opened by a ``[Processing] <graph>``
line (or, where a tool prints none, a ``[Config] model: <name>`` line); tags are found anywhere in a line, so GraphNet's ``log_prompt`` prefix and
other decorations are accepted. Lines that belong to no known tag (``Trial …``,
``[Profiling]``, ``OK``, ``ESt=…``) are ignored. Batch headers
``===== [i/n] <sample> =====`` delimit samples: a sample that produced no block
still yields a record (``pass_mismatch`` when the pass manager said so, else
``runtime_error``), so nothing that was run is lost.

Pass manager lines seen before a block opens (a new process loading its passes)
belong to the next block. What each block becomes is decided in
:mod:`passnet.record._logblock`.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
from pathlib import Path
from typing import Any

from passnet.errors import InputFormatError
from passnet.record._logblock import Block, PassFacts, block_to_record
from passnet.record._schema import ErrorInfo, EvalRecord, Timing, TimingStats, latest_records
from passnet.status import Status

__all__ = ["parse_log"]

log = logging.getLogger(__name__)

_SECTION = re.compile(r"^=====\s*\[(\d+)/(\d+)\]\s+(.+?)\s*=====$")
_TOTAL = re.compile(r"^=====\s*Total\b")
_PROCESSING = re.compile(r"\[Processing\]\s+(\S.*?)\s*$")
_CONFIG = re.compile(r"\[Config\]\s+(\w+):\s*(.*?)\s*$")
_PASSNET = re.compile(r"\[passnet\]\s+(\w+):\s*(.*?)\s*$")
_PERFORMANCE = re.compile(r"\[Performance\]\[(\w+)\]:\s*(.*?)\s*$")
_DATATYPE = re.compile(r"\[Datatype\]\[(\w+)\]:(.*)$")
_DTYPE_MATCH = re.compile(r"\[DataType\].*\bmatch:\s*(True|False)")
_CORRECTNESS = re.compile(r"\[Correctness\]\[([^\]]+)\]:\s*(.*?)\s*$")
_RESULT = re.compile(r"\[Result\]\s+status:\s*(\S+)")
_FAIL = re.compile(r"\[Fail due to (.+?)\.?\]")
_SPEEDUP = re.compile(r"\[Speedup\]\[(\w+)\]:\s*(.*?)\s*$")
_EXEC_FAILED = re.compile(r"\b(Eager|Compiled) model execution failed:\s*(.*?)\s*$")
_DEBUG_EXEC = re.compile(r"debug-model-execution\s+(\S+)")
_PM_LOADED = re.compile(r"\[PassMgrBackend\]\s+Loaded\s+\d+\s+passes:\s*(.*?)\s*$")
_PM_APPLIED = re.compile(
    r"\[PassMgrBackend\]\s+Applied\s+(?:(\d+)\s+)?replacements?\s+with\s+(.+?)\.?\s*$"
)
_PM_FAILED = re.compile(r"\[PassMgrBackend\]\s+Pass\s+(.+?)\s+failed to match")
_PM_CRASHED = re.compile(r"\[PassMgrBackend\]\s+Pass\s+(.+?)\s+CRASHED with error:\s*(.*?)\s*$")
_PM_NO_MODIFIED = re.compile(r"\[PassMgrBackend\]\s+Warning: No passes modified the graph")
_PM_OTHER = re.compile(r"\[PassMgrBackend\]\s+(?:Diagnostic:\s*)?(.*?)\s*$")
_HAS_MATCHED = re.compile(r"Has Any pass matched\?\s*\[(True|False)\]")
_EARLY_EXIT = re.compile(r"Pass testing early exits on pass mismatch")

_BOOL_TOKENS = {"1": True, "0": False, "true": True, "false": False}


class _Parser:
    def __init__(self, source: str, compiler: str | None) -> None:
        self.source = source
        self.compiler = compiler
        self.records: list[EvalRecord] = []
        self.block: Block | None = None
        self.pending = PassFacts()
        self.section: str | None = None
        self.section_line = 0
        self.section_records = 0
        self.line_no = 0

    def error(self, message: str, line: int | None = None) -> InputFormatError:
        return InputFormatError(message, file=self.source, line=line or self.line_no)

    # -- block boundaries -------------------------------------------------

    def close_block(self) -> None:
        if self.block is not None:
            self.records.append(block_to_record(self.block, self.source, self.compiler))
            self.section_records += 1
            self.block = None

    def flush_pending(self, *, section_end: bool) -> None:
        """Turn pass-manager output that no block claimed into a record where it means one."""
        facts, self.pending = self.pending, PassFacts()
        name = self.section or Path(self.source).name
        if facts.mismatch:
            block = Block(graph=name, line=self.section_line or self.line_no, passes=facts)
            self.records.append(block_to_record(block, self.source, self.compiler))
            self.section_records += 1
        elif section_end and self.section is not None and self.section_records == 0:
            block = Block(graph=name, line=self.section_line, passes=facts)
            block.error = ErrorInfo(
                type="IncompleteLog",
                message="the sample printed no [Processing] block: it crashed before evaluating",
                stage="log",
            )
            block.status = Status.RUNTIME_ERROR
            self.records.append(block_to_record(block, self.source, self.compiler))
            self.section_records += 1
        elif facts.seen:
            log.debug("%s: pass manager output without a graph block ignored", self.source)

    def end_section(self) -> None:
        self.close_block()
        self.flush_pending(section_end=True)

    # -- lines ------------------------------------------------------------

    def feed(self, line: str) -> None:
        self.line_no += 1
        text = line.rstrip("\r\n")
        stripped = text.strip()
        if m := _SECTION.match(stripped):
            self.end_section()
            self.section, self.section_line, self.section_records = m.group(3), self.line_no, 0
            return
        if _TOTAL.match(stripped):
            self.end_section()
            self.section = None
            return
        if m := _PASSNET.search(text):
            # first: a passnet error message may quote any other tag
            self.feed_passnet(self.need_block("[passnet]"), m.group(1), m.group(2))
            return
        if m := _PROCESSING.search(text):
            self.open_block(m.group(1))
            return
        if (m := _CONFIG.search(text)) and m.group(1) == "model":
            if self.block is None or self.block.result is not None:
                # GraphNet's validators print [Config] lines without a [Processing] line
                self.open_block(m.group(2))
        if self.feed_pass_line(text):
            return
        self.feed_data_line(text)

    def open_block(self, graph: str) -> None:
        self.close_block()
        if self.pending.mismatch:
            self.flush_pending(section_end=False)
        self.block = Block(graph=graph, line=self.line_no, passes=self.pending)
        self.pending = PassFacts()

    def pass_target(self, loaded: bool) -> PassFacts:
        block = self.block
        if block is None or self.pending.seen or (loaded and block.result is not None):
            return self.pending
        return block.passes

    def feed_pass_line(self, text: str) -> bool:
        if not (
            "[PassMgrBackend]" in text or _HAS_MATCHED.search(text) or _EARLY_EXIT.search(text)
        ):
            return False
        loaded = _PM_LOADED.search(text)
        facts = self.pass_target(loaded is not None)
        facts.seen = True
        if m := _HAS_MATCHED.search(text):
            facts.has_matched = m.group(1) == "True"
        elif _EARLY_EXIT.search(text):
            facts.early_exit = True
        elif loaded is not None:
            try:
                names = ast.literal_eval(loaded.group(1))
            except (ValueError, SyntaxError) as exc:
                raise self.error(f"unreadable pass list {loaded.group(1)!r}") from exc
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise self.error(f"pass list is not a list of names: {loaded.group(1)!r}")
            facts.loaded.extend(n for n in names if n not in facts.loaded)
        elif m := _PM_APPLIED.search(text):
            name = m.group(2)
            facts.replacements[name] = facts.replacements.get(name, 0) + int(m.group(1) or 1)
        elif m := _PM_FAILED.search(text):
            facts.replacements.setdefault(m.group(1), 0)
        elif m := _PM_CRASHED.search(text):
            facts.crash = f"pass {m.group(1)} crashed: {m.group(2)}"
            facts.diagnostics.append(facts.crash)
        elif _PM_NO_MODIFIED.search(text):
            facts.no_modified = True
        elif m := _PM_OTHER.search(text):
            facts.diagnostics.append(m.group(1))
        return True

    def need_block(self, tag: str) -> Block:
        if self.block is None:
            raise self.error(f"{tag} line outside a graph block (no [Processing] line before it)")
        return self.block

    def feed_data_line(self, text: str) -> None:
        if m := _EXEC_FAILED.search(text):
            if self.block is not None:
                stage = "eager" if m.group(1) == "Eager" else "compiled"
                self.block.messages.append((stage, m.group(2)))
        elif m := _DEBUG_EXEC.search(text):
            if self.block is not None:
                self.block.exc_type = m.group(1)
        elif m := _CONFIG.search(text):
            self.need_block("[Config]").config[m.group(1)] = m.group(2)
        elif m := _CORRECTNESS.search(text):
            self.feed_correctness(self.need_block("[Correctness]"), m.group(1), m.group(2))
        elif m := _DATATYPE.search(text):
            self.need_block("[Datatype]").dtypes[m.group(1)] = m.group(2).split()
        elif m := _DTYPE_MATCH.search(text):
            self.need_block("[DataType]").dtype_match = m.group(1) == "True"
        elif m := _RESULT.search(text):
            block = self.need_block("[Result]")
            block.result = m.group(1).lower()
        elif m := _FAIL.search(text):
            self.need_block("[Fail due to …]").fail_reason = m.group(1)
        elif m := _PERFORMANCE.search(text):
            block = self.need_block("[Performance]")
            block.timing[m.group(1)] = self.timing(m.group(2))
        elif m := _SPEEDUP.search(text):
            block = self.need_block("[Speedup]")
            kind = "device" if m.group(1) in ("gpu", "device") else m.group(1)
            block.speedups[kind] = self.number(m.group(2), f"[Speedup][{m.group(1)}]")

    def number(self, text: str, what: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise self.error(f"{what} is not a number: {text!r}") from None

    def json_value(self, text: str, what: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.error(f"{what} is not valid JSON: {exc.msg}") from exc

    def feed_passnet(self, block: Block, key: str, value: str) -> None:
        if key == "status":
            try:
                block.status = Status(value)
            except ValueError:
                raise self.error(f"unknown passnet status {value!r}") from None
        elif key == "meta":
            meta = self.json_value(value, "[passnet] meta")
            if not isinstance(meta, dict):
                raise self.error("[passnet] meta must be a JSON object")
            block.meta = meta
        elif key == "error":
            e = self.json_value(value, "[passnet] error")
            if not isinstance(e, dict) or not {"type", "message", "stage"} <= e.keys():
                raise self.error("[passnet] error needs type, message and stage")
            block.error = ErrorInfo(
                type=str(e["type"]),
                message=str(e["message"]),
                stage=str(e["stage"]),
                context={str(k): str(v) for k, v in (e.get("context") or {}).items()},
            )

    def feed_correctness(self, block: Block, key: str, value: str) -> None:
        tokens = value.split()
        if key == "equal" or key.startswith("all_close_"):
            try:
                block.checks[key] = [_BOOL_TOKENS[tok.lower()] for tok in tokens]
            except KeyError:
                raise self.error(
                    f"[Correctness][{key}] must be 0/1 values, got {value!r}"
                ) from None
        elif key in ("max_diff", "mean_diff"):
            block.checks[key] = [self.number(tok, f"[Correctness][{key}]") for tok in tokens]

    def timing(self, text: str) -> Timing:
        d = self.json_value(text, "[Performance]")
        try:
            return Timing(
                e2e=_stats(d["e2e"]),
                device=_stats(d["gpu"]) if "gpu" in d else None,
                retries=int(d.get("retries", 0)),
                unstable=bool(d.get("unstable", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self.error(f"[Performance] timing is malformed: {exc!r}") from exc

    # -- records ----------------------------------------------------------

    def finish_all(self) -> list[EvalRecord]:
        self.end_section()
        if not self.records:
            raise InputFormatError("no graph evaluation found in the log", file=self.source)
        return self.records


def _stats(d: dict[str, Any]) -> TimingStats:
    # GraphNet logs print the mean (and no median); ours print both. Either will do.
    median = float(d["median"] if "median" in d else d["mean"])
    return TimingStats(
        median_ms=median,
        iqr_ms=float(d.get("iqr", math.nan)),
        mean_ms=float(d.get("mean", median)),
        std_ms=float(d.get("std", math.nan)),
        min_ms=float(d.get("min", math.nan)),
        max_ms=float(d.get("max", math.nan)),
        n=int(d.get("n", 0)),
    )


def parse_log(source: str | Path, *, compiler: str | None = None) -> list[EvalRecord]:
    """Parse a PassNet/GraphNet log (a file path, or the log text itself) into records.

    A ``Path`` is read as a file; a ``str`` is a file name if it has no newline
    and names an existing file, else it is the log text. ``compiler`` names the
    compiler where the log has no ``[Config] compiler:`` line. Raises
    :class:`~passnet.errors.InputFormatError` (with ``file`` and ``line``) on a
    malformed line, and when the log holds no evaluation at all.
    """
    if isinstance(source, Path) or ("\n" not in source and Path(source).is_file()):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputFormatError(f"cannot read log: {exc.strerror}", file=path) from exc
        name = str(path)
    else:
        text, name = source, "<text>"
    parser = _Parser(name, compiler)
    for line in text.splitlines():
        parser.feed(line)
    # eval.log is appended to: a graph evaluated again (its sample changed) appears twice
    return latest_records(parser.finish_all(), name)
