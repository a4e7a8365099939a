"""Executors found by name: the ``passnet.executors`` entry-point group.

An executor is registered by a small factory class (:class:`ExecutorFactory`), not by
the executor itself: the factory says which command-line options the executor takes
(:attr:`ExecutorFactory.options`), refuses a request it cannot serve
(:meth:`ExecutorFactory.check`, before any work starts) and makes the executor
(:meth:`ExecutorFactory.create`). Factories import nothing heavy, so that a command's
parser lists every executor's options without importing torch or Ray; the executor's
own module is imported in :meth:`~ExecutorFactory.create`.

passnet's ``local`` and ``ray`` register through the entry-point group in its
``pyproject.toml``, as a third party's would::

    [project.entry-points."passnet.executors"]
    slurm = "mypkg.slurm:SlurmFactory"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from passnet.errors import PassnetError
from passnet.registry import Registry

if TYPE_CHECKING:
    from passnet.runner._executor import Executor

__all__ = [
    "EXECUTORS",
    "ExecutorFactory",
    "ExecutorOption",
    "ExecutorRequest",
    "LocalFactory",
    "RayFactory",
]

WORK_KINDS = ("evaluations", "samples")
"""What a command hands an executor: evaluation jobs (``passnet eval``), or the samples
of a dataset stage (validate, decompose, generalize, bench build)."""


@dataclass(frozen=True)
class ExecutorOption:
    """A command-line option of one executor: ``flag`` (``--ray-address``), read into
    :attr:`ExecutorRequest.options` under :attr:`dest` (None when not given)."""

    flag: str
    help: str
    type: Callable[[str], Any] = str
    metavar: str = "VALUE"

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class ExecutorRequest:
    """What a command asks of an executor: the executor's checks and its construction
    read it. ``options``: the values of the executor's own options (by ``dest``)."""

    work: str = "evaluations"
    """One of :data:`WORK_KINDS`."""
    jobs: int | None = None
    """Work at once (None: the executor's default)."""
    device: str = "cpu"
    options: Mapping[str, Any] = field(default_factory=dict)
    prepare_workers: int = 0
    overlap: int = 1
    graphs_per_child: int = 1

    def option(self, name: str) -> Any:
        return self.options.get(name)


class ExecutorFactory:
    """How a command finds, checks and makes one kind of executor (subclass, set
    :attr:`name`, :attr:`summary` and :attr:`options`, implement :meth:`create`)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    """One line for ``--executor``'s help."""
    options: ClassVar[tuple[ExecutorOption, ...]] = ()

    @classmethod
    def check(cls, request: ExecutorRequest) -> None:
        """Raise :class:`~passnet.errors.PassnetError` for a request this executor cannot
        serve (options that do not fit together), before any work starts."""
        if request.work not in WORK_KINDS:
            raise PassnetError(f"unknown kind of work {request.work!r}; known: {WORK_KINDS}")
        if request.jobs is not None and request.jobs < 1:
            raise PassnetError(f"--jobs must be 1 or more, got {request.jobs}")

    @classmethod
    def create(cls, request: ExecutorRequest) -> Executor | None:
        """The executor for a checked ``request``; None: the caller's own local default
        (:func:`passnet.runner.run_evaluations` makes its :class:`LocalExecutor` itself)."""
        raise NotImplementedError


EXECUTORS: Registry[type[ExecutorFactory]] = Registry(
    "executor", ExecutorFactory, group="passnet.executors"
)


class LocalFactory(ExecutorFactory):
    """This machine: evaluations on its device slots, dataset samples in ``--jobs``
    isolated children at once."""

    name = "local"
    summary = "this machine (default)"

    @classmethod
    def check(cls, request: ExecutorRequest) -> None:
        super().check(request)
        if request.work != "evaluations" or not request.prepare_workers:
            return
        if request.graphs_per_child != 1:
            raise PassnetError(
                "--graphs-per-child shares a child between graphs; with --prepare-workers "
                "every graph has a child of its own"
            )
        if request.overlap > 1:
            raise PassnetError(
                "--overlap compiles beside timing in the evaluations themselves; it does not "
                "take --prepare-workers"
            )

    @classmethod
    def create(cls, request: ExecutorRequest) -> Executor | None:
        if request.work == "evaluations":
            return None  # run_evaluations' own: it probes the device and places slots
        from passnet.runner._executor import LocalExecutor

        return LocalExecutor(["cpu"] * (request.jobs or 1))


class RayFactory(ExecutorFactory):
    """The workers of a Ray cluster (:class:`passnet.runner.RayExecutor`)."""

    name = "ray"
    summary = "the workers of a Ray cluster (pip install 'passnet[ray]'; docs/scale.md)"
    options = (
        ExecutorOption(
            "--ray-address",
            "the cluster to join (HOST:6379, or auto for the one `ray start` runs on this "
            "machine; default: start a Ray cluster of this machine)",
            metavar="ADDR",
        ),
        ExecutorOption(
            "--ray-cpus",
            "CPU cores each job owns (default: evaluations on cuda a GPU node's cores "
            "divided among its GPUs, on cpu --threads or a whole node; dataset samples: 1)",
            type=int,
            metavar="N",
        ),
    )

    @classmethod
    def check(cls, request: ExecutorRequest) -> None:
        super().check(request)
        cpus = request.option("ray_cpus")
        if cpus is not None and cpus < 1:
            raise PassnetError(f"--ray-cpus must be 1 or more, got {cpus}")
        if request.work != "evaluations":
            return
        if request.graphs_per_child != 1:
            raise PassnetError(
                "--graphs-per-child shares a child between graphs; --executor ray gives every "
                "graph a child of its own"
            )
        if request.overlap > 1:
            raise PassnetError(
                "--overlap compiles beside timing in the evaluations of one machine; "
                "--executor ray times each graph on a GPU of its own"
            )
        if request.device not in ("cpu", "cuda"):
            raise PassnetError(
                f"--executor ray takes --device cpu or cuda (Ray gives each evaluation a free GPU "
                f"of the cluster), got {request.device!r}"
            )
        if request.prepare_workers:
            raise PassnetError(
                "--prepare-workers compiles ahead on this machine (the local executor); with "
                "--executor ray each worker compiles its own graphs"
            )

    @classmethod
    def create(cls, request: ExecutorRequest) -> Executor:
        from passnet.runner._ray import RayExecutor

        return RayExecutor(
            request.option("ray_address"),
            cpus_per_job=request.option("ray_cpus"),
            max_workers=request.jobs,
        )
