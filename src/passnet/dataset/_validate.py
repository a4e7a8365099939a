"""Validate samples against GraphNet's five constraints (GraphNet §4.1–4.2.2).

Reload → run → re-extract → compare, in this order:

1. **serializable** — every file parses (``load_sample``) and the metadata survives a
   render → parse round trip; later, the re-extracted graph B is written and loads back.
2. **custom_op_accessible** — every ``torch.ops.<ns>.<op>`` outside torch's own
   namespaces is declared in ``graph_net.json`` ``custom_ops`` with a module or a
   source file in the sample, and resolves once that is loaded.
3. **statically_analyzable** — ``model.py`` traces into an FX graph whose every call
   has an operator name; re-extracting the built module with Dynamo gives one graph
   with the same operator sequence (assertion ops and what only feeds them aside:
   Dynamo moves them) that computes the same outputs.
4. **runnable** — the module runs on inputs replayed from the metadata.
5. **decomposable** — the graph splits at its middle op into two subgraphs whose
   composition computes the same outputs.

Each sample gets a :class:`ValidationReport`: which constraint failed, why, and
where (file, line, node). A check that cannot run because an earlier one failed
is ``skipped``. Reports are JSON (one per line in a ``.jsonl`` file).
"""

from __future__ import annotations

import ast
import enum
import json
import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from passnet._parse import parse_python
from passnet.dataset._extract import ExtractOptions, capture_graphs, write_graph_sample
from passnet.dataset._hash import canonical_graph, is_assertion_op
from passnet.dataset._stage import ChildDeath, SampleJob, Stage, run_stage
from passnet.errors import (
    DatasetError,
    InputFormatError,
    PassnetError,
    SampleError,
    TooLarge,
)
from passnet.evaluate import check_fits
from passnet.isolate import TORCH_PRELOAD
from passnet.record import read_jsonl
from passnet.sample import (
    PADDLE,
    Sample,
    canonical_op_name,
    compare_outputs,
    compute_nodes,
    declared_custom_ops,
    is_builtin_op_namespace,
    load_custom_op,
    load_sample,
    model_line,
    node_line,
    op_resolves,
    parse_meta_file,
    recorded_hash,
    render_meta_file,
    trace_sample,
)
from passnet.status import Status

_COPIES = 3
"""Validation holds a sample's tensors about three times: the inputs, a clone per run,
the re-extracted graph's inputs."""

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "CheckStatus",
    "Constraint",
    "ConstraintCheck",
    "ValidationReport",
    "read_reports",
    "validate_sample",
    "validate_samples",
]

log = logging.getLogger(__name__)

PRELOAD: list[str] = [*TORCH_PRELOAD, "passnet.dataset._validate"]
"""Modules the forkserver of the validation children imports once for all of them."""

REPORT_SCHEMA_VERSION = 2
"""2: ``name``, ``root`` and ``fingerprint`` (the record key of :func:`run_stage`); version
1 reports load (and are validated again by a resuming run: they have no fingerprint)."""


class Constraint(str, enum.Enum):
    """GraphNet's five dataset constraints."""

    RUNNABLE = "runnable"
    SERIALIZABLE = "serializable"
    DECOMPOSABLE = "decomposable"
    STATICALLY_ANALYZABLE = "statically_analyzable"
    CUSTOM_OP_ACCESSIBLE = "custom_op_accessible"


class CheckStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    """Not checked because a check it depends on failed."""


@dataclass
class ConstraintCheck:
    """The verdict on one constraint, with where the problem is."""

    constraint: Constraint
    status: CheckStatus
    message: str = ""
    file: str | None = None
    line: int | None = None
    node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "constraint": self.constraint.value,
            "status": self.status.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "node": self.node,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConstraintCheck:
        return cls(
            Constraint(d["constraint"]),
            CheckStatus(d["status"]),
            d.get("message", ""),
            d.get("file"),
            d.get("line"),
            d.get("node"),
        )

    def where(self) -> str:
        parts = [
            p
            for p in (
                self.file,
                f"line {self.line}" if self.line else None,
                self.node and f"node {self.node}",
            )
            if p
        ]
        return ", ".join(parts)


@dataclass
class ValidationReport:
    """The outcome of validating one sample."""

    sample: str
    status: Status
    """``ok`` when every constraint passed, ``sample_error`` otherwise."""
    checks: list[ConstraintCheck]
    graph_hash: str = ""
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    torch_version: str = torch.__version__
    name: str = ""
    """The sample's path relative to the run's root."""
    root: str = ""
    fingerprint: str = ""
    """The validation options' digest (:meth:`passnet.dataset.Stage.fingerprint`)."""
    schema_version: int = REPORT_SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def failed(self) -> list[ConstraintCheck]:
        return [c for c in self.checks if c.status is CheckStatus.FAILED]

    def check(self, constraint: Constraint) -> ConstraintCheck:
        return next(c for c in self.checks if c.constraint is constraint)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "sample": self.sample,
            "status": self.status.value,
            "graph_hash": self.graph_hash,
            "checks": [c.to_dict() for c in self.checks],
            "notes": self.notes,
            "elapsed_s": round(self.elapsed_s, 3),
            "torch_version": self.torch_version,
            "name": self.name,
            "root": self.root,
            "fingerprint": self.fingerprint,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValidationReport:
        version = d.get("schema_version", REPORT_SCHEMA_VERSION)
        if version > REPORT_SCHEMA_VERSION:
            raise InputFormatError(
                f"validation report schema {version} is newer than this passnet ({REPORT_SCHEMA_VERSION})"
            )
        return cls(
            sample=d["sample"],
            status=Status(d["status"]),
            checks=[ConstraintCheck.from_dict(c) for c in d["checks"]],
            graph_hash=d.get("graph_hash", ""),
            notes=list(d.get("notes", [])),
            elapsed_s=float(d.get("elapsed_s", 0.0)),
            torch_version=d.get("torch_version", ""),
            name=d.get("name", ""),
            root=d.get("root", ""),
            fingerprint=d.get("fingerprint", ""),
            schema_version=version,
        )


class _Checks:
    """Collects verdicts; a constraint's first failure is the one reported."""

    def __init__(self) -> None:
        self.results: dict[Constraint, ConstraintCheck] = {}
        self.notes: list[str] = []

    def fail(self, constraint: Constraint, message: str, **where: Any) -> None:
        if (
            constraint not in self.results
            or self.results[constraint].status is not CheckStatus.FAILED
        ):
            self.results[constraint] = ConstraintCheck(
                constraint, CheckStatus.FAILED, message, **where
            )

    def passed(self, constraint: Constraint, message: str = "") -> None:
        self.results.setdefault(
            constraint, ConstraintCheck(constraint, CheckStatus.PASSED, message)
        )

    def skip(self, constraint: Constraint, message: str) -> None:
        self.results.setdefault(
            constraint, ConstraintCheck(constraint, CheckStatus.SKIPPED, message)
        )

    def failed(self, constraint: Constraint) -> bool:
        return constraint in self.results and self.results[constraint].status is CheckStatus.FAILED

    def report(
        self,
        sample: Path,
        started: float,
        graph_hash: str = "",
        status: Status | None = None,
    ) -> ValidationReport:
        """The report; ``status`` overrides the verdict of the checks (``too_large``)."""
        checks = [
            self.results.get(c) or ConstraintCheck(c, CheckStatus.SKIPPED, "not reached")
            for c in Constraint
        ]
        if status is None:
            status = (
                Status.SAMPLE_ERROR
                if any(c.status is not CheckStatus.PASSED for c in checks)
                else Status.OK
            )
        return ValidationReport(
            str(sample), status, checks, graph_hash, self.notes, time.perf_counter() - started
        )


# --------------------------------------------------------------------------- helpers


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _flatten(outputs: Any) -> list[Any]:
    if isinstance(outputs, (list, tuple)):
        return [x for o in outputs for x in _flatten(o)]
    return [outputs]


def _difference(actual: Any, expected: Any) -> str | None:
    """None when ``actual`` outputs match ``expected`` at the baseline tolerance, else what
    differs (:func:`passnet.sample.compare_outputs`)."""
    found = compare_outputs(actual, expected)
    return None if found.status is Status.OK else found.message


class _LocatingInterpreter(torch.fx.Interpreter):
    """Runs a graph node by node and remembers the node that raised."""

    failed: torch.fx.Node | None = None

    def run_node(self, n: torch.fx.Node) -> Any:
        try:
            return super().run_node(n)
        except Exception:
            self.failed = self.failed or n
            raise


def _failing_node(gm: torch.fx.GraphModule, inputs: list[Any]) -> torch.fx.Node | None:
    interpreter = _LocatingInterpreter(gm)
    try:
        with torch.no_grad():
            interpreter.run(*_clone(inputs))
    except Exception:  # noqa: BLE001 - we only want to know where it fails
        return interpreter.failed
    return None


class _RecordingInterpreter(torch.fx.Interpreter):
    """Runs a graph and remembers which nodes produced tensors."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.tensor_nodes: set[torch.fx.Node] = set()

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        if any(isinstance(v, torch.Tensor) for v in _flatten(value)):
            self.tensor_nodes.add(n)
        return value


def _run_recording(gm: torch.fx.GraphModule, inputs: list[Any]) -> tuple[Any, set[torch.fx.Node]]:
    interpreter = _RecordingInterpreter(gm)
    with torch.no_grad():
        torch.manual_seed(0)
        outputs = interpreter.run(*_clone(inputs))
    return outputs, interpreter.tensor_nodes


def _loose(op: str) -> str:
    bare = op.rsplit(".", 1)[-1]
    return bare if bare.startswith("__") else bare.rstrip("_")


def _structure(
    gm: torch.fx.GraphModule, tensor_nodes: set[torch.fx.Node]
) -> list[tuple[str, torch.fx.Node]]:
    """The tensor operations in order. Left out: shape arithmetic (Dynamo specializes it
    differently each time), runtime assertions and what only feeds them (Dynamo moves them)."""
    nodes = compute_nodes(gm)
    dropped: set[torch.fx.Node] = set()
    for node in reversed(nodes):
        op = canonical_op_name(node) or node.op
        if is_assertion_op(op) or (node.users and all(u in dropped for u in node.users)):
            dropped.add(node)
    return [
        (canonical_op_name(n) or n.op, n) for n in nodes if n not in dropped and n in tensor_nodes
    ]


def _compare_structure(
    a: torch.fx.GraphModule,
    tensors_a: set[torch.fx.Node],
    b: torch.fx.GraphModule,
    tensors_b: set[torch.fx.Node],
) -> tuple[str | None, str | None, bool]:
    """(difference, node of A where it starts, loose) — difference None when equal."""
    sa, sb = _structure(a, tensors_a), _structure(b, tensors_b)
    names_a, names_b = [n for n, _ in sa], [n for n, _ in sb]
    if names_a == names_b:
        return None, None, False
    if [_loose(n) for n in names_a] == [_loose(n) for n in names_b]:
        return None, None, True
    for i, (x, y) in enumerate(zip(names_a, names_b)):
        if _loose(x) != _loose(y):
            return f"op {i} is {y} after re-extraction, {x} in model.py", sa[i][1].name, False
    i = min(len(sa), len(sb))
    node = sa[i][1].name if i < len(sa) else None
    return f"{len(sb)} ops after re-extraction, {len(sa)} in model.py", node, False


def _metadata_round_trip(sample: Sample) -> tuple[str, str] | None:
    """(field, problem) if rendering and re-parsing the metadata changes it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "weight_meta.py"
        metas = [*sample.weight_metas, *sample.input_metas]
        path.write_text(render_meta_file(metas))
        again = parse_meta_file(path)
    for before, after in zip(metas, again):
        for attr in ("name", "shape", "dtype", "data", "mean", "std", "min_val", "max_val"):
            x, y = getattr(before, attr), getattr(after, attr)
            if (
                x != y
                and not (_is_nan(x) and _is_nan(y))
                and not (_nan_list(x) and _nan_list(y) and _same_list(x, y))
            ):
                return f"{before.name}.{attr}", f"{x!r} reads back as {y!r}"
    if len(again) != len(metas):
        return "weight_meta.py", f"{len(metas)} tensors read back as {len(again)}"
    try:
        json.dumps(sample.graph_net, allow_nan=False)
    except ValueError as exc:
        return "graph_net.json", str(exc)
    return None


def _is_nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _nan_list(x: Any) -> bool:
    return isinstance(x, list) and any(_is_nan(v) for v in x)


def _same_list(x: list[Any], y: list[Any]) -> bool:
    return len(x) == len(y) and all(a == b or (_is_nan(a) and _is_nan(b)) for a, b in zip(x, y))


def _custom_op_calls(source: str) -> list[tuple[str, str, int]]:
    """(namespace, op, line) of every ``torch.ops.<ns>.<op>`` chain in model.py."""
    calls = []
    for node in ast.walk(parse_python(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            ns_node = node.value
            if (
                isinstance(ns_node.value, ast.Attribute)
                and ns_node.value.attr == "ops"
                and isinstance(ns_node.value.value, ast.Name)
                and ns_node.value.value.id == "torch"
            ):
                calls.append((ns_node.attr, node.attr, node.lineno))
    return calls


def _check_custom_ops(sample: Sample, checks: _Checks) -> None:
    declared = declared_custom_ops(sample)
    tried: set[str] = set()
    for namespace, op, line in _custom_op_calls(sample.model_source):
        qualname = f"{namespace}::{op}"
        if is_builtin_op_namespace(namespace) or qualname in tried:
            continue
        tried.add(qualname)
        where = {"file": "model.py", "line": line, "node": qualname}
        entry = declared.get(qualname)
        if entry is None:
            message = f"custom operator {qualname} is not declared in graph_net.json custom_ops"
            checks.fail(Constraint.CUSTOM_OP_ACCESSIBLE, message, **where)
            continue
        try:
            load_custom_op(sample, entry)
        except Exception as exc:  # noqa: BLE001 - user code: reported with the op
            message = f"cannot load the code of {qualname}: {type(exc).__name__}: {exc}"
            checks.fail(Constraint.CUSTOM_OP_ACCESSIBLE, message, **where)
            continue
        if not op_resolves(qualname):
            message = f"{qualname} does not resolve after loading its declared code"
            checks.fail(Constraint.CUSTOM_OP_ACCESSIBLE, message, **where)
    checks.passed(Constraint.CUSTOM_OP_ACCESSIBLE)


def _check_decomposable(
    gm: torch.fx.GraphModule, inputs: list[Any], expected: Any, checks: _Checks
) -> None:
    nodes = compute_nodes(gm)
    if len(nodes) < 2:
        checks.notes.append("a single op: nothing to split")
        checks.passed(Constraint.DECOMPOSABLE, "single op")
        return
    cut = len(nodes) // 2
    part = {n: (0 if i < cut else 1) for i, n in enumerate(nodes)}
    where = {"node": nodes[cut].name, "line": node_line(nodes[cut]), "file": "model.py"}
    try:
        split = split_module(gm, gm, lambda n: part.get(n, 0))
        with torch.no_grad():
            torch.manual_seed(0)
            actual = split(*_clone(inputs))
    except Exception as exc:  # noqa: BLE001 - any failure of the split is the finding
        checks.fail(
            Constraint.DECOMPOSABLE,
            f"cannot split at op {cut}: {type(exc).__name__}: {exc}",
            **where,
        )
        return
    difference = _difference(actual, expected)
    if difference:
        checks.fail(
            Constraint.DECOMPOSABLE,
            f"split at op {cut} computes different outputs: {difference}",
            **where,
        )
    else:
        checks.passed(Constraint.DECOMPOSABLE, f"split at op {cut} of {len(nodes)}")


def _check_reextraction(
    sample: Sample,
    gm_a: torch.fx.GraphModule,
    module: torch.nn.Module,
    inputs: list[Any],
    expected: Any,
    checks: _Checks,
) -> None:
    static, serial = Constraint.STATICALLY_ANALYZABLE, Constraint.SERIALIZABLE
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            _, graphs = capture_graphs(module, tuple(_clone(inputs)))
    except Exception as exc:  # noqa: BLE001 - Dynamo failing on model.py is the finding
        checks.fail(
            static,
            f"re-extraction fails: {type(exc).__name__}: {exc}",
            file="model.py",
            line=model_line(exc),
        )
        return
    if len(graphs) != 1:
        # Dynamo's nodes carry their source line: the break is after the first graph's last op.
        lines = [node_line(n) for g in graphs[:1] for n in compute_nodes(g.gm)]
        line = next((x for x in reversed(lines) if x is not None), None)
        where = f" after line {line}" if line else ""
        message = f"re-extraction gives {len(graphs)} graphs instead of one (graph break{where})"
        checks.fail(static, message, file="model.py", line=line)
        return
    captured = graphs[0]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            write_graph_sample(
                captured, Path(tmp) / "b", model=sample.name, index=0, options=ExtractOptions()
            )
            gm_b = trace_sample(load_sample(Path(tmp) / "b"))
        except PassnetError as exc:
            message = f"re-extracted graph does not round-trip: {exc.message}"
            checks.fail(serial, message, node=exc.context.get("node"))
            return
    try:
        actual, tensors_b = _run_recording(gm_b, captured.example_inputs)
    except Exception as exc:  # noqa: BLE001 - the re-extracted graph failing is the finding
        checks.fail(serial, f"re-extracted graph fails to run: {type(exc).__name__}: {exc}")
        return
    try:
        _, tensors_a = _run_recording(gm_a, inputs)
    except Exception:  # noqa: BLE001 - the trace should run like the module; else compare all ops
        tensors_a = set(compute_nodes(gm_a))
    difference, node, loose = _compare_structure(gm_a, tensors_a, gm_b, tensors_b)
    if difference:
        line = next((node_line(n) for n in gm_a.graph.nodes if n.name == node), None)
        message = f"re-extracted graph differs: {difference}"
        checks.fail(static, message, file="model.py", node=node, line=line)
        return
    if loose:
        checks.notes.append("re-extraction spells some ops differently (same operators)")
    difference = _difference(actual, expected)
    if difference:
        checks.fail(static, f"re-extracted graph computes different outputs: {difference}")
        return
    checks.passed(static)
    checks.passed(serial)


# --------------------------------------------------------------------------- entry points


def validate_sample(path: str | Path, *, seed: int = 0) -> ValidationReport:
    """Check one sample against the five constraints (on CPU). Never raises for a bad sample."""
    started = time.perf_counter()
    path = Path(path)
    checks = _Checks()
    try:
        sample = load_sample(path)
    except SampleError as exc:
        ctx = exc.context
        checks.fail(
            Constraint.SERIALIZABLE,
            exc.message,
            file=ctx.get("file"),
            line=_int(ctx.get("line")),
            node=ctx.get("field"),
        )
        for c in Constraint:
            checks.skip(c, "the sample does not load")
        return checks.report(path, started)
    problem = _metadata_round_trip(sample)
    if problem:
        checks.fail(
            Constraint.SERIALIZABLE,
            f"metadata does not round-trip: {problem[1]}",
            file="weight_meta.py",
            node=problem[0],
        )
    if sample.framework == PADDLE:
        from passnet.dataset._validate_paddle import validate_paddle

        return validate_paddle(sample, checks, seed, started)
    _check_custom_ops(sample, checks)

    try:
        gm = trace_sample(sample)
    except DatasetError as exc:
        checks.fail(
            Constraint.STATICALLY_ANALYZABLE,
            exc.message,
            file="model.py",
            line=_int(exc.context.get("line")),
        )
        gm = None
    graph_hash = ""
    if gm is not None:
        unnamed = [
            n for n in compute_nodes(gm) if (canonical_op_name(n) or "").startswith("<unnamed")
        ]
        if unnamed:
            checks.fail(
                Constraint.STATICALLY_ANALYZABLE,
                f"{len(unnamed)} calls have no operator name",
                file="model.py",
                node=unnamed[0].name,
                line=node_line(unnamed[0]),
            )
        graph_hash = canonical_graph(sample, gm).graph_hash

    try:
        check_fits(sample, "cpu", copies=_COPIES)
    except TooLarge as exc:
        for c in (Constraint.RUNNABLE, Constraint.DECOMPOSABLE, Constraint.STATICALLY_ANALYZABLE):
            checks.skip(c, f"not run: {exc.message}")
        checks.notes.append(f"too large: {exc.message}")
        return checks.report(path, started, graph_hash, status=Status.TOO_LARGE)
    try:
        module = sample.build_module("cpu")
        inputs = sample.replay_inputs("cpu", seed)
        with torch.no_grad():
            torch.manual_seed(0)
            expected = module(*_clone(inputs))
    except Exception as exc:  # noqa: BLE001 - the sample failing is the finding
        failing = _failing_node(gm, inputs) if gm is not None and "inputs" in locals() else None
        message = exc.message if isinstance(exc, PassnetError) else f"{type(exc).__name__}: {exc}"
        line = node_line(failing) if failing is not None else model_line(exc)
        checks.fail(
            Constraint.RUNNABLE,
            message,
            file="model.py",
            line=line,
            node=failing.name if failing else None,
        )
        for c in Constraint:
            checks.skip(c, "the sample does not run")
        return checks.report(path, started, graph_hash)
    checks.passed(Constraint.RUNNABLE)
    if any(
        isinstance(o, torch.Tensor) and o.is_floating_point() and not torch.isfinite(o).all()
        for o in _flatten(expected)
    ):
        checks.notes.append("eager outputs contain NaN/inf")

    if gm is None:
        checks.skip(Constraint.DECOMPOSABLE, "model.py does not trace")
    else:
        _check_decomposable(gm, inputs, expected, checks)
        if not checks.failed(Constraint.STATICALLY_ANALYZABLE):
            _check_reextraction(sample, gm, module, inputs, expected, checks)
    checks.passed(Constraint.SERIALIZABLE)
    checks.passed(Constraint.STATICALLY_ANALYZABLE)
    return checks.report(path, started, graph_hash)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and str(value).isdigit() else None


def _validator_error(path: str | Path, exc: Exception) -> ValidationReport:
    """The report of a sample the validator itself failed on (a bug of ours, not a
    finding about the sample): every check skipped, the error in the notes."""
    log.exception("validator failed on %s", path)
    checks = _Checks()
    for c in Constraint:
        checks.skip(c, f"validator error: {type(exc).__name__}: {exc}")
    report = checks.report(Path(path), time.perf_counter())
    report.notes.append(f"validator error: {type(exc).__name__}: {exc}")
    return report


@dataclass(frozen=True)
class ValidateStage(Stage[ValidationReport]):
    """``validate`` as a dataset stage: one sample's constraint checks (no files; the
    reports are the records)."""

    verb: ClassVar[str] = "validate"
    records_file: ClassVar[str] = "validate.jsonl"
    seed: int = 0

    def preload(self) -> list[str]:
        return list(PRELOAD)

    def record(self, data: dict[str, Any]) -> ValidationReport:
        return ValidationReport.from_dict(data)

    def resume_hash(self, record: ValidationReport) -> str:
        """The sample's recorded hash (``graph_hash.txt``), not the report's canonical
        one: a report resumes when the sample still declares what it did."""
        return recorded_hash(record.sample)

    def work(self, job: SampleJob, send: Callable[[tuple[str, Any]], None]) -> ValidationReport:
        send(("stage", "validate"))
        try:
            return validate_sample(job.sample, seed=self.seed)
        except Exception as exc:  # noqa: BLE001 - a validator bug on one sample must not end the batch
            return _validator_error(job.sample, exc)

    def failed(
        self, job: SampleJob, death: ChildDeath, provisional: ValidationReport | None
    ) -> ValidationReport:
        """A crash or hang fails the sample (runnable), not the batch."""
        checks = _Checks()
        checks.fail(Constraint.RUNNABLE, f"validation process: {death.message}")
        for c in Constraint:
            if c is not Constraint.RUNNABLE:
                checks.skip(c, f"validation process: {death.kind}")
        return checks.report(Path(job.sample), time.perf_counter())

    def catalog(self, catalog: Any, record: ValidationReport) -> None:
        failed = [c.to_dict() for c in record.failed]
        try:
            if not catalog.has_sample(record.sample):
                catalog.add_sample(record.sample)
            catalog.record_validation(record.sample, record.status.value, failed)
        except PassnetError as exc:
            log.warning("catalog: cannot record the validation of %s: %s", record.sample, exc)


def validate_samples(
    paths: Iterable[str | Path],
    *,
    seed: int = 0,
    done: Iterable[str] = (),
    on_report: Callable[[ValidationReport], None] | None = None,
    isolated: bool = True,
    timeout_s: float = 600.0,
    records_path: str | Path | None = None,
    root: str | Path | None = None,
    resume: bool = True,
    executor: Any = None,
    jobs: int = 1,
    progress: bool = False,
    catalog: Any = None,
) -> list[ValidationReport]:
    """Validate several samples: the :class:`ValidateStage` run by
    :func:`~passnet.dataset.run_stage`. ``done`` lists samples (as strings) to skip.

    ``on_report`` sees each new report as soon as it exists (show progress). With
    ``records_path`` the reports are appended there as they finish (rewritten in input
    order when the run ends), and with ``resume`` a sample recorded there (same name,
    graph hash and seed) is not validated again. With ``isolated`` (the default) each
    sample is checked in its own child process on ``executor`` (default: this machine,
    ``jobs`` at once), so a segfault or a hang in sample code ends as a failed report
    (with the last line the child wrote to its stderr). A child that cannot be started
    at all is no finding about a sample: :class:`~passnet.errors.ChildStartError` ends
    the batch, naming the cause (the reports so far are kept; a re-run resumes).
    """
    skip = set(done)
    todo = [Path(p) for p in paths if str(p) not in skip]
    if not todo:
        return []
    run = run_stage(
        ValidateStage(timeout_s=timeout_s, seed=seed),
        todo,
        None,
        records_path=records_path,
        find=False,
        root=root,
        resume=resume,
        executor=executor,
        jobs=jobs,
        isolated=isolated,
        progress=progress,
        catalog=catalog,
        on_record=on_report,
    )
    return run.records


def read_reports(path: str | Path) -> list[ValidationReport]:
    """Reports from a JSON Lines file (a missing file has none), read by
    :func:`passnet.record.read_jsonl`: a torn last line is skipped with a warning, any other
    bad line is an :class:`InputFormatError` with file and line."""
    path = Path(path)
    if not path.is_file():
        return []
    return read_jsonl(path, ValidationReport.from_dict, what="a validation report")
