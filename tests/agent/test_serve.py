"""``passnet serve``'s endpoint on 127.0.0.1: token, size limit, bounded concurrency, and the
submission evaluated only in the isolated child."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from passnet.agent import MIN_REWARD, RewardServer, ServeConfig
from passnet.evaluate import evaluate_sample
from passnet.runner import LocalExecutor
from passnet.task import MANIFEST_FILE
from tests.agent.conftest import fast_settings

TOKEN = "t0ken-for-the-tests-0123456789"
B = 0.1


def _request(
    server: RewardServer, method: str, path: str, body: Any = None, token: str | None = TOKEN
) -> tuple[int, dict[str, Any], dict[str, str]]:
    host, port = server.address
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{host}:{port}{path}", data=data, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def _server(task, tmp_path: Path, executor: Any = None, **overrides: Any) -> RewardServer:
    config = ServeConfig(token=TOKEN, port=0, settings=fast_settings(), **overrides)
    server = RewardServer([task], config, workdir=tmp_path / "serve", executor=executor)
    server.start()
    return server


def _submission(task: str, files: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"task": task, "files": files, **extra}


def test_every_route_but_health_needs_the_token(mlp_task, tmp_path):
    server = _server(mlp_task, tmp_path)
    try:
        assert _request(server, "GET", "/health", token=None)[:2] == (200, {"ok": True})
        for token in (None, "wrong-token-wrong-token", TOKEN[:-1]):
            status, body, headers = _request(server, "GET", "/tasks", token=token)
            assert (
                status == 401
                and "token" in body["error"]
                and headers["WWW-Authenticate"] == "Bearer"
            )
            sub = _submission("mlp", {MANIFEST_FILE: "[]"})
            assert _request(server, "POST", "/evaluate", sub, token=token)[0] == 401
        status, body, _ = _request(server, "GET", "/tasks")
        assert status == 200 and body["tasks"][0]["name"] == "mlp"
        assert body["tasks"][0]["dtypes"] == {"graphs/sadhaklal_mlp-iris": "float32"}
    finally:
        server.close()


def test_bodies_over_the_limit_and_bad_submissions_are_refused(mlp_task, tmp_path):
    server = _server(mlp_task, tmp_path, max_request_bytes=2048)
    try:
        big = _submission("mlp", {MANIFEST_FILE: "[]", "Big.py": "#" * 4000})
        status, body, _ = _request(server, "POST", "/evaluate", big)
        assert status == 413 and "2048 bytes" in body["error"]
        cases = [
            (_submission("nope", {MANIFEST_FILE: "[]"}), 404, "no task 'nope'"),
            (_submission("mlp", {"../x.py": "", MANIFEST_FILE: "[]"}), 400, "file name"),
            (_submission("mlp", {"A.py": ""}), 400, MANIFEST_FILE),
            (_submission("mlp", {MANIFEST_FILE: "[]"}, command="rm -rf /"), 400, "unknown field"),
            (_submission("mlp", {MANIFEST_FILE: "[]"}, timing="slow"), 400, "timing"),
        ]
        for sub, code, text in cases:
            status, body, _ = _request(server, "POST", "/evaluate", sub)
            assert status == code and text in body["error"], body
        host, port = server.address
        with socket.create_connection((host, port)) as raw:  # no Content-Length
            raw.sendall(
                f"POST /evaluate HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
            )
            assert b" 411 " in raw.recv(200)
    finally:
        server.close()


def test_the_reward_comes_from_the_isolated_harness_and_the_server_never_imports_code(
    mlp_task, tmp_path
):
    marker = tmp_path / "imported.txt"
    cheat = f"open({str(marker)!r}, 'w').write('ran')\n" + (
        "import torch\n\ndef pattern(in_0):\n    return torch.relu(in_0)\n\n"
        "def replacement_args(in_0):\n    return (in_0,)\n\n"
        "def f(x):\n    return torch.relu(x)\n\ndef replacement_func():\n    return f\n"
    )
    server = _server(mlp_task, tmp_path)
    try:
        sub = _submission("mlp", {"Cheat.py": cheat, MANIFEST_FILE: '["Cheat"]'}, timing="quick")
        status, body, _ = _request(server, "POST", "/evaluate", sub)
        assert status == 200, body
        assert body["statuses"] == {"graphs/sadhaklal_mlp-iris": "pass_rejected"}
        assert body["rejected"] and body["outcome"] == "rejected"
        assert body["reward"] == MIN_REWARD  # a rejected pass earns less than any that runs
        assert "1. matching" in body["diagnostics"] and "3. performance" in body["diagnostics"]
        status, body, _ = _request(
            server, "POST", "/evaluate", _submission("mlp", {MANIFEST_FILE: "[]"})
        )
        assert status == 200 and body["statuses"] == {"graphs/sadhaklal_mlp-iris": "pass_mismatch"}
        assert body["es"]["-5"] == pytest.approx(B) and body["as"] == pytest.approx(B)
        assert body["outcome"] == "ran" and body["reward"] == pytest.approx(B)  # empty: AS = b
        status, body, _ = _request(  # a manifest naming a rule that is not there
            server, "POST", "/evaluate", _submission("mlp", {MANIFEST_FILE: '["Missing"]'})
        )
        assert status == 200 and body["reward"] == MIN_REWARD, body
        assert body["outcome"] == "unevaluable" and "no file Missing.py" in body["problem"]
        broken = {"Bad.py": "def pattern(:\n", MANIFEST_FILE: '["Bad"]'}  # does not parse
        status, body, _ = _request(server, "POST", "/evaluate", _submission("mlp", broken))
        assert status == 200 and body["reward"] == MIN_REWARD, body
        assert body["outcome"] == "rejected"
    finally:
        server.close()
    assert not marker.exists()
    assert not any(m == "pass_dir" or m.startswith("pass_dir.") for m in sys.modules)
    assert not any((tmp_path / "serve").iterdir())  # submissions are removed after evaluation


def test_evaluations_at_once_are_bounded_and_extra_requests_get_503(mlp_task, tmp_path):
    entered, release = threading.Event(), threading.Event()

    def held_evaluation(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(60)
        return evaluate_sample(*args, **kwargs)

    executor = LocalExecutor(["cpu"], evaluate=held_evaluation)
    server = _server(mlp_task, tmp_path, max_concurrent=1, max_pending=1, executor=executor)
    sub = _submission("mlp", {MANIFEST_FILE: "[]"}, timing="quick")
    results: list[int] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(_request(server, "POST", "/evaluate", sub)[0])
        )
    ]
    try:
        threads[0].start()
        assert entered.wait(60)  # the first holds the one slot
        threads.append(
            threading.Thread(
                target=lambda: results.append(_request(server, "POST", "/evaluate", sub)[0])
            )
        )
        threads[1].start()
        deadline = time.monotonic() + 30
        while server._waiting < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        status, body, headers = _request(server, "POST", "/evaluate", sub)
        assert status == 503 and "busy" in body["error"] and headers["Retry-After"] == "30"
        release.set()
        for t in threads:
            t.join(120)
        assert results == [200, 200]
    finally:
        release.set()
        server.close()
        executor.close()
