"""``passnet serve``: the evaluation as an HTTP reward endpoint for trainers on other machines.

API (JSON in and out; every request but ``/health`` needs ``Authorization: Bearer TOKEN``)::

    GET  /health     {"ok": true}
    GET  /tasks      {"tasks": [{"name", "graphs": [...], "dtypes": {...}}]}
    POST /evaluate   {"task": NAME, "files": {"MyPass.py": "...", "sorted_output_pass_rule_names.json": "[...]"},
                      "timing": "full" | "quick", "graphs": [...] (optional)}
                  -> {"task", "reward", "outcome", "as", "es": {"-5": ...}, "rejected",
                      "problem", "statuses": {graph: status}, "diagnostics": TEXT, "elapsed_s"}

``reward`` is the environment's (:func:`~passnet.agent.evaluate_pass_dir`): AS when the
passes ran, :data:`~passnet.agent.MIN_REWARD` when they were rejected or could not be
evaluated; ``outcome`` says which (``ran``, ``rejected``, ``unevaluable``).

Limits: a request body larger than ``max_request_bytes`` is refused (413) before it is
read; at most ``max_concurrent`` evaluations run at once and ``max_pending`` wait for a
turn (more: 503 with ``Retry-After``). A submission is only ever written to a fresh
folder as files and evaluated by the runner in the isolated evaluation child: this process
never imports it, never runs a command it was sent, and serves only the tasks it was
started with. It binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from passnet.agent._diagnostics import render_evaluation
from passnet.agent._errors import AgentError
from passnet.agent._evaluator import evaluate_pass_dir, local_executor, quick_settings
from passnet.agent._prompt import task_dtypes
from passnet.agent._workspace import MAX_FILE_BYTES, MAX_FILES
from passnet.evaluate import EvalSettings
from passnet.runner import Executor
from passnet.task import MANIFEST_FILE, Task

__all__ = ["RewardServer", "ServeConfig"]

log = logging.getLogger(__name__)

_FILE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.py")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServeConfig:
    """Where and how ``passnet serve`` listens and evaluates."""

    token: str
    host: str = "127.0.0.1"
    port: int = 8757
    """0: any free port (the server's ``address`` says which)."""
    max_request_bytes: int = 1 << 20
    max_concurrent: int = 1
    max_pending: int = 8
    device: str = "cpu"
    settings: EvalSettings = field(default_factory=EvalSettings)
    """``"timing": "full"``; ``"quick"`` uses :func:`quick_settings` of these."""
    b: float = 0.1
    read_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if len(self.token) < 16:
            raise AgentError("the serve token must be at least 16 characters", option="token")
        if self.max_concurrent < 1 or self.max_pending < 0 or self.max_request_bytes < 1:
            raise AgentError(
                "max_concurrent must be >= 1, max_pending >= 0, max_request_bytes >= 1"
            )


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class RewardServer:
    """An HTTP server evaluating submitted pass directories on a fixed set of tasks."""

    def __init__(
        self,
        tasks: list[Task],
        config: ServeConfig,
        *,
        workdir: str | Path | None = None,
        executor: Executor | None = None,
    ) -> None:
        names = [t.name for t in tasks]
        clash = sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise AgentError(f"several tasks are named {clash[0]!r}: serve them separately")
        if not tasks:
            raise AgentError("serve needs at least one task")
        self.config = config
        self.tasks = {t.name: t for t in tasks}
        self.dtypes = {t.name: task_dtypes(t) for t in tasks}
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="passnet-serve-"))
        self._own_executor = executor is None
        self.executor = executor or local_executor(config.device, config.max_concurrent)
        self._slots = threading.BoundedSemaphore(config.max_concurrent)
        self._waiting = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((config.host, config.port), self._handler_class())
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        if config.host not in _LOOPBACK:
            log.warning(
                "serving on %s: anyone who can reach this address and holds the token can "
                "run evaluations on this machine",
                config.host,
            )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> tuple[str, int]:
        """Serve in a background thread; returns (host, port)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self.address

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        """Stop serving; remove the working folder if the server made it."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._own_executor:
            self.executor.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- requests ----------------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.config.token.encode()
        )

    def task_list(self) -> dict[str, Any]:
        return {
            "tasks": [
                {"name": n, "graphs": list(t.graph_entries), "dtypes": self.dtypes[n]}
                for n, t in self.tasks.items()
            ]
        }

    def evaluate(self, request: Any) -> dict[str, Any]:
        """Check a submission, wait for a slot, evaluate it, answer."""
        task, files, settings, graphs = self._check(request)
        with self._lock:
            if self._waiting >= self.config.max_pending + self.config.max_concurrent:
                raise _Refused(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    "busy: too many evaluations waiting; try again later",
                    {"Retry-After": "30"},
                )
            self._waiting += 1
        try:
            with self._slots:
                return self._evaluate(task, files, settings, graphs)
        finally:
            with self._lock:
                self._waiting -= 1

    def _check(self, request: Any) -> tuple[Task, dict[str, str], EvalSettings, list[str] | None]:
        bad = HTTPStatus.BAD_REQUEST
        if not isinstance(request, dict):
            raise _Refused(bad, "the body must be a JSON object")
        unknown = sorted(set(request) - {"task", "files", "timing", "graphs"})
        if unknown:
            raise _Refused(
                bad, f"unknown field {unknown[0]!r} (fields: task, files, timing, graphs)"
            )
        task = self.tasks.get(request.get("task"))  # type: ignore[arg-type]
        if task is None:
            raise _Refused(
                HTTPStatus.NOT_FOUND,
                f"no task {request.get('task')!r}; tasks: {', '.join(self.tasks)}",
            )
        files = request.get("files")
        if not isinstance(files, dict) or not files:
            raise _Refused(bad, "files must be an object of file name -> text")
        if len(files) > MAX_FILES:
            raise _Refused(bad, f"at most {MAX_FILES} files")
        for name, text in files.items():
            if name != MANIFEST_FILE and not _FILE_NAME.fullmatch(name):
                raise _Refused(
                    bad, f"file name {name!r}: a plain Python file name or {MANIFEST_FILE}"
                )
            if not isinstance(text, str) or len(text.encode()) > MAX_FILE_BYTES:
                raise _Refused(bad, f"file {name!r}: text of at most {MAX_FILE_BYTES} bytes")
        if MANIFEST_FILE not in files:
            raise _Refused(bad, f"files must include {MANIFEST_FILE}")
        timing = request.get("timing", "full")
        if timing not in ("full", "quick"):
            raise _Refused(bad, "timing must be 'full' or 'quick'")
        settings = (
            self.config.settings if timing == "full" else quick_settings(self.config.settings)
        )
        graphs = request.get("graphs")
        if graphs is not None:
            if not isinstance(graphs, list) or not all(g in task.graph_entries for g in graphs):
                raise _Refused(
                    bad, f"graphs must be a list of the task's graphs: {list(task.graph_entries)}"
                )
        return task, files, settings, graphs

    def _evaluate(
        self, task: Task, files: dict[str, str], settings: EvalSettings, graphs: list[str] | None
    ) -> dict[str, Any]:
        folder = self.workdir / f"req-{uuid.uuid4().hex}"
        pass_dir = folder / "pass_dir"
        pass_dir.mkdir(parents=True)
        try:
            for name, text in files.items():
                (pass_dir / name).write_text(text, encoding="utf-8")
            ev = evaluate_pass_dir(
                task,
                pass_dir,
                folder / "eval",
                settings=settings,
                device=self.config.device,
                graphs=graphs,
                executor=self.executor,
                b=self.config.b,
            )
            return {
                "task": task.name,
                "reward": ev.reward,
                "outcome": ev.outcome,
                "as": ev.as_score,
                "es": {str(t): v for t, v in ev.es.items()},
                "rejected": ev.rejected,
                "problem": ev.problem,
                "statuses": {r.graph: r.status.value for r in ev.records},
                "diagnostics": render_evaluation(ev, self.dtypes[task.name]),
                "elapsed_s": ev.elapsed_s,
            }
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = server.config.read_timeout_s
            server_version = "passnet-serve"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                log.info("%s %s", self.address_string(), format % args)

            def _send(
                self,
                status: HTTPStatus,
                body: dict[str, Any],
                headers: dict[str, str] | None = None,
            ) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _guard(self) -> None:
                if not server.authorized(self.headers.get("Authorization")):
                    raise _Refused(
                        HTTPStatus.UNAUTHORIZED,
                        "missing or wrong token (Authorization: Bearer TOKEN)",
                        {"WWW-Authenticate": "Bearer"},
                    )

            def _handle(self, route: Any) -> None:
                try:
                    self._send(HTTPStatus.OK, route())
                except _Refused as exc:
                    self.close_connection = True
                    self._send(exc.status, {"error": str(exc)}, exc.headers)
                except Exception as exc:  # noqa: BLE001 - a server error is an answer, not a crash
                    log.exception("request failed")
                    self._send(
                        HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}
                    )

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                def route() -> dict[str, Any]:
                    if self.path == "/health":
                        return {"ok": True}
                    self._guard()
                    if self.path == "/tasks":
                        return server.task_list()
                    raise _Refused(HTTPStatus.NOT_FOUND, f"no route GET {self.path}")

                self._handle(route)

            def do_POST(self) -> None:  # noqa: N802
                def route() -> dict[str, Any]:
                    self._guard()
                    if self.path != "/evaluate":
                        raise _Refused(HTTPStatus.NOT_FOUND, f"no route POST {self.path}")
                    length = self.headers.get("Content-Length")
                    if length is None or not length.isdigit():
                        raise _Refused(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
                    if int(length) > server.config.max_request_bytes:
                        raise _Refused(
                            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                            f"the body exceeds {server.config.max_request_bytes} bytes",
                        )
                    try:
                        request = json.loads(self.rfile.read(int(length)))
                    except (ValueError, UnicodeDecodeError) as exc:
                        raise _Refused(
                            HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}"
                        ) from exc
                    return server.evaluate(request)

                self._handle(route)

        return Handler
