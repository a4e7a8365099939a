"""``--executor NAME``, ``--jobs`` and each executor's own options, shared by the commands
that run work on an executor (eval, validate, decompose, generalize, bench build).

Nothing here knows an executor by name: the names, their options and their rules come
from the executors' factories (:data:`passnet.runner.EXECUTORS`, the
``passnet.executors`` entry-point group); the factories import nothing heavy.
"""

from __future__ import annotations

import argparse
from typing import Any

from passnet.errors import PassnetError

__all__ = ["add_executor_arguments", "executor_request", "make_executor"]


def add_executor_arguments(p: argparse.ArgumentParser, what: str, jobs_help: str) -> None:
    """Add ``--executor``, ``--jobs`` and every registered executor's options to ``p``;
    ``what`` names the work in the help (``evaluations``, ``samples``)."""
    from passnet.runner import EXECUTORS

    factories = [EXECUTORS.get(name) for name in EXECUTORS.names()]
    p.add_argument("--jobs", type=int, default=None, help=jobs_help)
    listed = "; ".join(f"{f.name}: {f.summary}" for f in factories)
    p.add_argument(
        "--executor",
        default="local",
        metavar="NAME",
        help=f"where the {what} run ({listed})",
    )
    added: set[str] = set()
    for factory in factories:
        for option in factory.options:
            if option.flag in added:
                continue
            added.add(option.flag)
            p.add_argument(
                option.flag,
                dest=option.dest,
                type=option.type,
                default=None,
                metavar=option.metavar,
                help=f"with --executor {factory.name}: {option.help}",
            )


def executor_request(args: argparse.Namespace, work: str, **fields: Any) -> Any:
    """The :class:`~passnet.runner.ExecutorRequest` of a command's arguments, checked by
    the executor it names (an option of another executor, or options that do not fit,
    raise :class:`~passnet.errors.PassnetError` before any work starts). ``fields``:
    the request's other fields (``device``, ``threads``, ...)."""
    from passnet.runner import EXECUTORS, ExecutorRequest

    factory = EXECUTORS.get(args.executor)
    own = {option.dest for option in factory.options}
    for name in EXECUTORS.names():
        for option in EXECUTORS.get(name).options:
            if option.dest not in own and getattr(args, option.dest, None) is not None:
                raise PassnetError(f"{option.flag} is an option of --executor {name}")
    request = ExecutorRequest(
        work=work,
        jobs=args.jobs,
        options={option.dest: getattr(args, option.dest, None) for option in factory.options},
        **fields,
    )
    factory.check(request)
    return request


def make_executor(args: argparse.Namespace, request: Any) -> Any:
    """The executor ``--executor`` names, made for ``request`` (None: the command's own
    local default); a cluster is joined here, before any work runs."""
    from passnet.runner import EXECUTORS

    return EXECUTORS.get(args.executor).create(request)
