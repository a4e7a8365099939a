"""Every parse of Python source in passnet holds one lock (``passnet._parse``)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import passnet
from passnet._parse import parse_python

SRC = Path(passnet.__file__).parent


def test_no_module_calls_ast_parse_directly() -> None:
    # CPython 3.11 can fail two threads parsing at once ("AST constructor recursion depth
    # mismatch": a parallel-evaluation test met it while loading samples in threads).
    direct = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_parse.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bast\.parse\(", line)
    ]
    assert direct == []


def test_parses_from_many_threads_all_succeed() -> None:
    source = "\n".join(f"def f{i}(a):\n    return [a * {i} for _ in range(3)]" for i in range(200))
    trees: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                trees.append(len(parse_python(source, "<threads>").body))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and trees == [200] * 60
