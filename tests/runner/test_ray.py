"""The executor contract, the same assertions on the local executor and on Ray (a cluster
of this machine on 127.0.0.1 that the tests start), and what only Ray has: workers that
die mid-job, GPUs as Ray resources, samples shipped with their jobs, a cluster joined by
address from ``passnet eval --executor ray``, and the errors that stop a run first."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from passnet.errors import DeviceUnavailable, MissingDependency, PassnetError
from passnet.evaluate import EvalSettings
from passnet.record import EvalRecord, compiler_config_hash
from passnet.runner import (
    EvalJob,
    Executor,
    LocalExecutor,
    RayExecutor,
    plan_items,
    read_records,
    run_evaluations,
)
from passnet.sample import load_sample
from passnet.status import Status
from tests.conftest import DEV, MLP

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="needs ray (pip install 'passnet[ray]')")
REPO = Path(__file__).resolve().parents[2]
SAME_FILES_SAMPLES = [
    DEV / "transformers-auto-model" / "bloom-tiny-random",
    DEV / "transformers-auto-model" / "prajjwal1_bert-tiny",
    DEV / "torchgeometric" / "GAE",
]
"""Real samples (with ``MLP``) decomposed on every executor: bert-tiny's input statistics
and GAE's fusible spans once followed the torch thread count."""


class ScriptedEvaluations:
    """Stands in for evaluate_sample, in this process or on a Ray worker. What it does for a
    graph is read from ``script.json`` in its folder, so one pool of Ray workers serves
    every test: sleep ``seconds``, kill its own process on the first ``die`` attempts, wait
    until evaluations have started in ``meet`` slots (processes or threads; a minute at most).
    Each start and end is appended to ``events.jsonl`` there (which process, device, GPU,
    the cores it runs on and those it was handed to pin its child to, the folder it was
    handed and the files in it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def script(self, plans: dict[str, dict[str, Any]] | None = None) -> None:
        (self.folder / "script.json").write_text(json.dumps(plans or {}))
        (self.folder / "events.jsonl").write_text("")

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        lines = (self.folder / "events.jsonl").read_text().splitlines()
        found = [json.loads(line) for line in lines if line]
        return [e for e in found if kind is None or e["event"] == kind]

    def _note(self, event: str, graph: str, **facts: Any) -> None:
        line = json.dumps({"event": event, "graph": graph, "t": time.time(), **facts})
        with open(self.folder / "events.jsonl", "a") as f:  # one short append: atomic
            f.write(line + "\n")

    def __call__(
        self,
        path: Path,
        compiler: str,
        config: dict[str, Any],
        device: str,
        settings: Any,
        *,
        graph_label: str,
        on_stage: Any = None,
        should_stop: Any = None,
        cores: Sequence[int] = (),
    ) -> EvalRecord:
        plan = json.loads((self.folder / "script.json").read_text()).get(graph_label, {})
        earlier = sum(1 for e in self.events("start") if e["graph"] == graph_label)
        self._note(
            "start",
            graph_label,
            pid=os.getpid(),
            thread=threading.get_ident(),
            device=device,
            gpus=os.environ.get("CUDA_VISIBLE_DEVICES"),
            cores=sorted(os.sched_getaffinity(0)),
            given=sorted(cores),
            path=str(path),
            files=sorted(p.name for p in Path(path).iterdir()),
        )
        if earlier < plan.get("die", 0):
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-job
        deadline = time.monotonic() + 60
        while len({(e["pid"], e["thread"]) for e in self.events("start")}) < plan.get("meet", 0):
            if time.monotonic() > deadline:  # the assertions after the run tell what went wrong
                break
            time.sleep(0.05)
        for stage in ("load", "compile", "measure") if on_stage else ():
            on_stage(stage)
        time.sleep(plan.get("seconds", 0.01))
        self._note("end", graph_label, pid=os.getpid(), gpus=os.environ.get("CUDA_VISIBLE_DEVICES"))
        return EvalRecord(
            graph=graph_label,
            graph_hash=load_sample(path).graph_hash,  # the copy's: the key a rerun resumes
            compiler=compiler,
            compiler_config=config,
            compiler_config_hash=compiler_config_hash(compiler, config),
            device=device,
            status=Status.OK,
            settings=settings.to_dict(),
        )


def _items(n: int) -> list[Any]:
    return plan_items([DEV])[:n]


def _jobs(items: list[Any], device: str = "cpu") -> list[EvalJob]:
    return [EvalJob(item, "eager", device=device) for item in items]


# -- errors that stop a run before anything runs (no cluster needed) ------------------------


def test_a_missing_ray_is_a_missing_dependency_naming_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingDependency) as caught:
        RayExecutor()
    assert caught.value.context["package"] == "ray"
    assert "passnet[ray]" in caught.value.context["install"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--ray-address", "127.0.0.1:1"], "--ray-address"),
        (["--ray-cpus", "2"], "--ray-cpus"),
        (["--executor", "ray", "--device", "cuda:1"], "--device cpu or cuda"),
        (["--executor", "ray", "--prepare-workers", "2"], "--prepare-workers"),
        (["--executor", "ray", "--ray-cpus", "0"], "--ray-cpus"),
    ],
)
def test_eval_refuses_ray_options_that_do_not_fit_before_any_graph_runs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    says: str,
) -> None:
    from passnet.cli import main

    out = tmp_path / "out"
    assert main(["eval", str(MLP), "--compiler", "eager", "--out", str(out), *extra]) == 2
    assert says in "".join(capsys.readouterr())
    assert not (out / "results.jsonl").exists()


def test_eval_without_ray_installed_stops_with_exit_2_before_any_graph_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)
    out = tmp_path / "out"
    assert (
        main(["eval", str(MLP), "--compiler", "eager", "--out", str(out), "--executor", "ray"]) == 2
    )
    assert "passnet[ray]" in "".join(capsys.readouterr())
    assert not (out / "results.jsonl").exists()


# -- a cluster of this machine, started by the first RayExecutor -------------------------


@pytest.fixture(scope="module")
def scripted_evaluations(tmp_path_factory: pytest.TempPathFactory) -> ScriptedEvaluations:
    fake = ScriptedEvaluations(tmp_path_factory.mktemp("scripted"))
    fake.script()
    return fake


@pytest.fixture
def scripted(scripted_evaluations: ScriptedEvaluations) -> ScriptedEvaluations:
    scripted_evaluations.script()
    return scripted_evaluations


@pytest.fixture(scope="module")
def ray_executor(scripted_evaluations: ScriptedEvaluations) -> Iterator[RayExecutor]:
    """Starts a local cluster on 127.0.0.1 (4 CPUs, 2 pretend GPUs): no address given, so
    this executor starts it and shuts it down when closed; the module's other Ray executors
    use its connection."""
    if not HAVE_RAY:
        pytest.skip("needs ray (pip install 'passnet[ray]')")
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # no token written to ~/.ray: 127.0.0.1 only
    temp = tempfile.mkdtemp(prefix="rt")  # short: Ray's socket paths must fit 107 bytes
    executor = RayExecutor(
        evaluate=scripted_evaluations,
        cpus_per_job=1,
        max_workers=2,
        max_retries=1,
        init_options={
            "num_cpus": 4,
            "num_gpus": 2,
            "_node_ip_address": "127.0.0.1",
            "_temp_dir": temp,
        },
    )
    try:
        yield executor
    finally:
        executor.close()
        shutil.rmtree(temp, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


@pytest.fixture(params=["local", "ray"])
def executor(request: pytest.FixtureRequest, scripted: ScriptedEvaluations) -> Iterator[Executor]:
    """Each executor with two slots, running the scripted evaluations."""
    if request.param == "local":
        with LocalExecutor(["slot:0", "slot:1"], evaluate=scripted) as local:
            yield local
    else:
        yield request.getfixturevalue("ray_executor")


# -- the contract, for every executor --------------------------------------------------


def test_every_job_comes_back_once_in_the_order_jobs_finish(
    executor: Executor, scripted: ScriptedEvaluations
) -> None:
    items = _items(4)
    scripted.script({items[0].label: {"seconds": 1.5, "meet": 2}})  # once the other slot runs
    order = [r.graph for r in executor.run(_jobs(items))]
    assert order[-1] == items[0].label  # the slow first job finishes last
    assert sorted(order) == sorted(i.label for i in items)
    assert sorted(e["graph"] for e in scripted.events("start")) == sorted(order)


def test_on_stage_hears_each_job_start_then_its_stages(
    executor: Executor, scripted: ScriptedEvaluations
) -> None:
    items = _items(3)
    heard: list[tuple[str, str]] = []
    records = list(
        executor.run(_jobs(items), on_stage=lambda j, s: heard.append((j.item.label, s)))
    )
    assert len(records) == len(items)
    for item in items:
        assert [s for g, s in heard if g == item.label] == ["start", "load", "compile", "measure"]


def test_run_evaluations_stores_each_record_once_under_the_device_asked_for(
    executor: Executor, scripted: ScriptedEvaluations, tmp_path: Path
) -> None:
    items = _items(5)
    summary = run_evaluations(
        items, compiler="eager", device="cpu", out_dir=tmp_path, executor=executor, echo_logs=False
    )
    labels = sorted(i.label for i in items)
    assert sorted(r.graph for r in summary.records) == labels
    stored = read_records(tmp_path / "results.jsonl")
    assert sorted(r.graph for r in stored) == labels
    assert {r.device for r in stored} == {"cpu"}
    again = run_evaluations(
        items, compiler="eager", device="cpu", out_dir=tmp_path, executor=executor, echo_logs=False
    )
    assert (again.evaluated, again.resumed) == (0, len(items))


def test_closing_the_results_early_starts_no_more_jobs(
    executor: Executor, scripted: ScriptedEvaluations
) -> None:
    items = _items(8)
    scripted.script({i.label: {"seconds": 0.3} for i in items})
    results = executor.run(_jobs(items))
    next(results)
    results.close()
    # A job handed to a worker just before the close may log its start a moment after it
    # (a Ray actor call is asynchronous): count once that has settled, then watch for more.
    time.sleep(0.6)
    started = len(scripted.events("start"))
    time.sleep(0.6)  # longer than a job: one started after the close would show
    assert len(scripted.events("start")) == started < len(items)


# -- Ray only ----------------------------------------------------------------------------


@needs_ray
def test_the_worker_evaluates_a_copy_of_the_sample_shipped_with_its_job(
    ray_executor: RayExecutor, scripted: ScriptedEvaluations
) -> None:
    (item,) = _items(1)
    list(ray_executor.run(_jobs([item])))
    (start,) = scripted.events("start")
    assert Path(start["path"]) != item.path and Path(start["path"]).name == item.path.name
    assert start["files"] == sorted(p.name for p in item.path.iterdir() if p.is_file())
    assert not Path(start["path"]).exists()  # the copy is gone with the job


@needs_ray
def test_a_path_a_job_names_that_a_node_cannot_read_stops_the_run_before_any_job(
    ray_executor: RayExecutor, scripted: ScriptedEvaluations, tmp_path: Path
) -> None:
    missing = tmp_path / "elsewhere" / "my_compiler.py"  # on no node: not shipped, not shared
    jobs = [EvalJob(item, f"{missing}:MyCompiler") for item in _items(2)]
    with pytest.raises(PassnetError, match=f"cannot read {missing}"):
        list(ray_executor.run(jobs))
    assert scripted.events() == []


@needs_ray
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_each_worker_is_pinned_to_cores_no_other_worker_holds(
    ray_executor: RayExecutor, scripted: ScriptedEvaluations
) -> None:
    items = _items(2)
    scripted.script({i.label: {"meet": 2} for i in items})  # one job on each worker
    list(ray_executor.run(_jobs(items)))
    starts = scripted.events("start")
    assert len({e["pid"] for e in starts}) == 2
    _assert_pinned_apart(starts, scripted.events("end"))


def _assert_pinned_apart(starts: list[dict[str, Any]], ends: list[dict[str, Any]]) -> None:
    """Each job ran pinned to one core (cpus_per_job=1), the one it handed its child, and
    jobs that ran at once on cores apart. (Jobs scripted to meet run at once unless this
    machine's cores are all claimed by other runs: then they take turns, never share.)"""
    ended = {e["graph"]: e["t"] for e in ends}
    for job in starts:
        assert len(job["cores"]) == 1 and job["given"] == job["cores"], job
    for i, one in enumerate(starts):
        for other in starts[i + 1 :]:
            at_once = one["t"] < ended[other["graph"]] and other["t"] < ended[one["graph"]]
            assert not (at_once and set(one["cores"]) & set(other["cores"])), (one, other)


CORES = Path(tempfile.gettempdir()) / "passnet-cores"
"""Where the jobs of this machine claim their cores (a lock file per core)."""


def _hold_cores(cores: list[int], folder: Path = CORES) -> list[Any]:
    """Claim ``cores`` as another job of this machine would (``flock`` on their lock
    files); a core a job holds now is waited for, half a minute at most."""
    import fcntl

    folder.mkdir(exist_ok=True)
    held = []
    for core in cores:
        lock = open(folder / f"{core}.lock", "a+")  # noqa: SIM115 - closed by the caller
        deadline = time.monotonic() + 30
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    for other in [*held, lock]:
                        other.close()
                    holder = (folder / f"{core}.lock").read_text().strip()
                    pytest.fail(f"core {core} stays claimed (pid {holder}) though no job runs here")
                time.sleep(0.05)
        held.append(lock)
    return held


@needs_ray
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_job_claims_its_cores_while_it_runs_and_waits_for_cores_another_holds(
    ray_executor: RayExecutor, scripted: ScriptedEvaluations
) -> None:
    """Cores are claimed per job, not per worker: a worker that runs two jobs one after
    another runs each pinned; once they are done no core of the machine is claimed (an idle
    worker, one Ray keeps for the next run, holds none); and jobs that find every core
    claimed (a worker still exiting, another cluster's job) wait until they are free, then
    run pinned, never unpinned over cores others hold."""
    items = _items(4)
    for item in items[:2]:  # the pool's same worker both times (it is the one idle last)
        list(ray_executor.run(_jobs([item])))
    one, two = scripted.events("start")
    assert one["pid"] == two["pid"]
    _assert_pinned_apart([one, two], scripted.events("end"))
    held = _hold_cores(sorted(os.sched_getaffinity(0)))  # no job runs: every core is free
    released: list[float] = []

    def release() -> None:
        released.append(time.time())
        for lock in held:
            lock.close()

    scripted.script({i.label: {"meet": 2} for i in items[2:]})
    timer = threading.Timer(1.5, release)
    timer.start()
    try:
        records = list(ray_executor.run(_jobs(items[2:])))
    finally:
        timer.cancel()
        if not released:
            release()
    assert len(records) == 2
    starts = scripted.events("start")
    assert len(starts) == 2 and all(e["t"] > released[0] for e in starts)
    assert len({e["pid"] for e in starts}) == 2
    _assert_pinned_apart(starts, scripted.events("end"))


# -- core claims (no cluster needed) ---------------------------------------------------

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity")


@linux_only
def test_a_claim_takes_free_cores_all_or_none_the_previous_ones_first(tmp_path: Path) -> None:
    from passnet.runner._ray import _claim_cores

    def claim(count: int, prefer: tuple[int, ...] = (), wait_s: float = 0.0) -> Any:
        return _claim_cores(count, range(4), prefer=prefer, wait_s=wait_s, folder=tmp_path)

    first = claim(2)
    assert first.cores == (2, 3) and not first.problem  # from the last core down
    second = claim(1, prefer=(3, 0))  # 3 is the first claim's: the free preferred one
    assert second.cores == (0,)
    third = claim(2, wait_s=0.3)  # only core 1 is free: none is taken
    assert third.cores == () and third.waited_s >= 0.3
    assert "2 of its 4 cores were not free" in third.problem
    assert f"held by pid {os.getpid()}" in third.problem
    assert claim(1).cores == (1,)  # the failed claim left core 1 free
    first.release()
    assert claim(2).cores == (2, 3)  # released: free again
    assert "fewer than 5" in claim(5, wait_s=60).problem  # never enough: no wait at all


@linux_only
def test_a_claim_waits_for_its_holder_and_a_killed_holder_leaves_no_claim(
    tmp_path: Path,
) -> None:
    from passnet.runner._ray import _claim_cores

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            "lock = open(sys.argv[1], 'a+')\n"
            "fcntl.flock(lock, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
            str(tmp_path / "0.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        threading.Timer(0.5, holder.kill).start()  # SIGKILL: it never releases the lock
        claim = _claim_cores(1, [0], wait_s=60, folder=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert claim.cores == (0,) and 0.4 < claim.waited_s < 30
    claim.release()


@linux_only
def test_a_worker_runs_each_job_on_cores_it_claims_for_that_job_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's cores are claimed while it evaluates, handed to the evaluation (whose
    child pins itself there) and released when it ends, even by an exception."""
    import fcntl

    from passnet.runner import _ray

    monkeypatch.setattr(_ray, "_cores_folder", lambda: tmp_path)
    seen: list[tuple[list[int], list[int], bool]] = []

    def evaluate(path: Path, *args: Any, cores: Sequence[int] = (), **kwargs: Any) -> Any:
        (core,) = cores
        with open(tmp_path / f"{core}.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False
            except BlockingIOError:
                held = True
        seen.append((sorted(cores), sorted(os.sched_getaffinity(0)), held))
        raise RuntimeError("the evaluation fails")

    failures: list[BaseException] = []

    def job_on_a_worker() -> None:  # its own thread: the worker pins the calling thread
        worker = _ray._Worker(evaluate, 1, stages=None)
        job = EvalJob(_items(1)[0], "eager", settings=EvalSettings(timeout_s=1.0))
        for _ in range(2):  # a claim not released: the second job would not get the core
            try:
                worker.evaluate((0, 0, 0), job, {}, "cpu")
            except RuntimeError as exc:
                failures.append(exc)

    thread = threading.Thread(target=job_on_a_worker)
    thread.start()
    thread.join()
    assert len(failures) == 2 and len(seen) == 2
    (cores, affinity, held), again = seen
    assert len(cores) == 1 and affinity == cores and held  # claimed while it ran
    assert again == seen[0]  # released by the failure, and claimed again by the next job
    last = max(os.sched_getaffinity(0))
    assert cores == [last]


@needs_ray
def test_cuda_jobs_take_one_gpu_each_and_never_two_timings_on_one_gpu(
    ray_executor: RayExecutor, scripted: ScriptedEvaluations
) -> None:
    items = _items(6)
    scripted.script({i.label: {"seconds": 0.3} for i in items})
    with RayExecutor(evaluate=scripted, cpus_per_job=1) as gpus:  # the module's cluster
        records = list(gpus.run(_jobs(items, device="cuda")))
        with pytest.raises(DeviceUnavailable, match="--device cuda"):
            list(gpus.run(_jobs(items[:1], device="cuda:1")))
    assert {r.device for r in records} == {"cuda"} and len(records) == len(items)
    starts = scripted.events("start")
    assert {e["device"] for e in starts} == {"cuda:0"}  # the one GPU Ray shows the worker
    assert {e["gpus"] for e in starts} == {"0", "1"}  # both pretend GPUs were used
    ends = {(e["graph"]): e["t"] for e in scripted.events("end")}
    spans = [(e["gpus"], e["t"], ends[e["graph"]]) for e in starts]
    for i, (gpu_a, start_a, end_a) in enumerate(spans):
        for gpu_b, start_b, end_b in spans[i + 1 :]:
            assert gpu_a != gpu_b or end_a <= start_b or end_b <= start_a


@needs_ray
def test_a_job_whose_worker_dies_runs_again_and_then_is_recorded_never_twice(
    ray_executor: RayExecutor, scripted: ScriptedEvaluations, tmp_path: Path
) -> None:
    items = _items(5)
    once, always = items[0].label, items[1].label
    scripted.script({once: {"die": 1}, always: {"die": 99}, items[2].label: {"seconds": 0.5}})
    summary = run_evaluations(
        items,
        compiler="eager",
        device="cpu",
        out_dir=tmp_path,
        executor=ray_executor,
        echo_logs=False,
    )
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    stored = {r.graph: r for r in read_records(tmp_path / "results.jsonl")}
    assert len(lines) == len(items) and sorted(stored) == sorted(i.label for i in items)
    assert stored[once].status is Status.OK  # its worker died once; it ran again
    lost = stored[always]  # died on both attempts (max_retries=1): a record, not a crash
    assert lost.status is Status.RUNTIME_ERROR
    assert lost.error is not None and lost.error.type == "WorkerDied"
    assert "2 attempt" in lost.error.message and lost.error.stage == "start"
    assert lost.sample_digest and lost.graph_hash  # keyed like any record: a rerun resumes it
    starts = [e["graph"] for e in scripted.events("start")]
    assert starts.count(once) == 2 and starts.count(always) == 2
    # the sample copies of the killed workers were swept when the run ended
    killed = {e["pid"] for e in scripted.events("start") if e["graph"] == always}
    assert not [
        p
        for p in Path(tempfile.gettempdir()).glob("passnet-sample-*")
        if any(p.name.startswith(f"passnet-sample-{pid}-") for pid in killed)
    ]
    assert summary.evaluated == len(items)
    again = run_evaluations(
        items,
        compiler="eager",
        device="cpu",
        out_dir=tmp_path,
        executor=ray_executor,
        echo_logs=False,
    )
    assert (again.evaluated, again.resumed) == (0, len(items))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def head_node() -> Iterator[tuple[str, dict[str, str]]]:
    """``ray start --head`` on 127.0.0.1 in its own process group: (address, environment
    to join it with). Stopped by signalling that group only (not ``ray stop``, which would
    stop every cluster of this machine)."""
    if not HAVE_RAY:
        pytest.skip("needs ray (pip install 'passnet[ray]')")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rt")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO / "src")}
    ray_cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", "--node-ip-address", "127.0.0.1"]
        + ["--port", str(port), "--num-cpus", "1", "--num-gpus", "0", "--temp-dir", temp]
        + ["--include-dashboard=false", "--disable-usage-stats"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # what SIGTERM has not ended yet
        except ProcessLookupError:
            pass
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def test_eval_joins_a_cluster_by_address_and_evaluates_a_real_graph_on_it(
    head_node: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, env = head_node
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "passnet.cli", "eval", str(MLP), "--compiler", "eager"]
    cmd += ["--executor", "ray", "--ray-address", address, "--out", str(out), "--quiet"]
    cmd += ["--warmup", "2", "--trials", "6", "--threads", "1", "--timeout", "120"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = read_records(out / "results.jsonl")
    assert record.status is Status.OK and record.device == "cpu"
    assert record.graph == MLP.name and record.eager is not None and record.compiled is not None


# -- dataset stages on Ray --------------------------------------------------------------


def _die_first_time(marks: str, index: int) -> tuple[int, int]:
    """A sample task: kills its own worker process the first time it runs for ``index``
    when ``index`` is 0, every time when it is 1; else answers (index, its pid)."""
    mark = Path(marks) / f"{index}-{os.getpid()}"
    tried = list(Path(marks).glob(f"{index}-*"))
    mark.write_text("")
    if index == 1 or (index == 0 and not tried):
        os.kill(os.getpid(), signal.SIGKILL)
    return index, os.getpid()


def test_a_sample_task_whose_worker_dies_runs_again_on_another_worker(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    from passnet.runner import SampleTask

    tasks = [SampleTask(_die_first_time, (str(tmp_path), i)) for i in (0, 2, 3)]
    results = dict(ray_executor.run_samples(tasks))
    assert sorted(results) == [0, 1, 2]  # each task's result once, by its index
    first, second = sorted(tmp_path.glob("0-*"), key=lambda p: p.stat().st_mtime_ns)
    assert results[0] == (0, int(second.name.split("-")[1]))  # the second attempt answered
    assert first.name != second.name  # ... in another worker process
    always = [SampleTask(_die_first_time, (str(tmp_path), 1))]
    with pytest.raises(PassnetError, match="died 2 times"):
        list(ray_executor.run_samples(always))  # max_retries=1: two attempts, then the error


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "decompose.jsonl"
    }


def _records(out: Path) -> list[dict[str, Any]]:
    """The records file's lines, timings and memory peaks aside (and the output folder,
    which the records name in their subgraphs' paths, as ``OUT``)."""
    text = (out / "decompose.jsonl").read_text().replace(str(out), "OUT")
    rows = [json.loads(line) for line in text.splitlines()]
    for row in rows:
        for timing in ("elapsed_s", "peak_rss_mb"):
            row.pop(timing)
    return rows


@pytest.mark.slow
def test_decompose_writes_the_same_files_on_ray_and_locally_whole_or_in_chunks(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """The files and records of ``passnet decompose`` are a function of the samples alone:
    the same with ``--jobs 1``, ``--jobs 2``, on Ray, and for the samples in two chunks."""
    from passnet.dataset import decompose_samples

    samples = [MLP, *SAME_FILES_SAMPLES]
    decompose_samples(samples, tmp_path / "one", root=DEV)
    decompose_samples(samples, tmp_path / "two", root=DEV, jobs=2)
    decompose_samples(samples, tmp_path / "ray", root=DEV, executor=ray_executor)
    decompose_samples(samples[:1], tmp_path / "chunks", root=DEV)
    decompose_samples(samples[1:], tmp_path / "chunks", root=DEV)
    whole = _tree(tmp_path / "one")
    assert len([f for f in whole if f.endswith("model.py")]) > 10
    for other in ("two", "ray", "chunks"):
        assert _tree(tmp_path / other) == whole, other
        assert _records(tmp_path / other) == _records(tmp_path / "one"), other


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


@pytest.mark.slow
def test_generalize_writes_the_same_files_on_ray_and_with_one_or_two_jobs(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """``passnet generalize``'s variants and records are the same with ``--jobs 1``,
    ``--jobs 2`` and on Ray (timings aside)."""
    from passnet.dataset import generalize_samples

    samples = [MLP, SAME_FILES_SAMPLES[0]]
    generalize_samples(samples, tmp_path / "one", root=DEV)
    generalize_samples(samples, tmp_path / "two", root=DEV, jobs=2)
    generalize_samples(samples, tmp_path / "ray", root=DEV, executor=ray_executor)

    def files(out: Path) -> dict[str, bytes]:
        return {k: v for k, v in _tree(out).items() if k != "generalize.jsonl"}

    def records(out: Path) -> list[Any]:
        text = (out / "generalize.jsonl").read_text().replace(str(out), "OUT")
        return [_without_timings(json.loads(line)) for line in text.splitlines()]

    whole = files(tmp_path / "one")
    assert len([f for f in whole if f.endswith("model.py")]) > 4
    for other in ("two", "ray"):
        assert files(tmp_path / other) == whole, other
        assert records(tmp_path / other) == records(tmp_path / "one"), other


@pytest.mark.slow
def test_bench_build_writes_the_same_benchmark_on_ray_and_with_one_or_two_jobs(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """``passnet bench build``'s tasks and manifest are the same, byte for byte, with its
    candidate step in this process, in isolated children with ``--jobs 1`` and ``2``, and
    on Ray; and when the subgraphs and variants it reads were written on Ray, in other
    folders (their ``graph_net.json`` name the parent relative to ``--root``)."""
    from passnet.dataset import build_bench, decompose_samples, generalize_samples

    samples = [MLP, SAME_FILES_SAMPLES[0]]

    def prepare(run: Path, executor: Any) -> None:
        decompose_samples(
            samples, run / "sub", ["fusible", "single-op"], root=DEV, executor=executor
        )
        fusible = sorted(p.parent for p in (run / "sub").rglob("fusible/*/model.py"))
        generalize_samples(
            fusible, run / "var", root=run / "sub", dtypes=["float16"], executor=executor
        )

    def build(run: Path, name: str, **options: Any) -> dict[str, bytes]:
        out = tmp_path / "bench" / name
        build_bench([run / "sub", run / "var"], out, root=run, eval_fraction=0.5, **options)
        return _tree(out)

    run = tmp_path / "run"
    prepare(run, None)
    whole = build(run, "in_process")
    assert len([f for f in whole if f.endswith("model.py")]) > 4
    assert any(f.startswith("eval-fusible/") for f in whole)
    for name, options in (
        ("jobs1", {"isolated": True, "jobs": 1}),
        ("jobs2", {"isolated": True, "jobs": 2}),
        ("ray", {"isolated": True, "executor": ray_executor}),
    ):
        assert build(run, name, **options) == whole, name
    elsewhere = tmp_path / "elsewhere" / "deeper" / "run"
    prepare(elsewhere, ray_executor)
    assert build(elsewhere, "from_ray") == whole
