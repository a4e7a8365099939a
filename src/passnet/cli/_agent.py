"""``passnet agent run|export`` and ``passnet serve``: PassAgent episodes, SFT exports, the
reward endpoint."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from passnet.cli._output import print_error
from passnet.errors import PassnetError

__all__ = ["add_commands"]

RUN_EXAMPLES = """\
examples:
  passnet agent run tasks/pooling --model Qwen/Qwen3-8B --base-url http://localhost:8000/v1
  passnet agent run tasks/* --model gpt-4.1 --base-url https://api.openai.com/v1 \\
      --api-key-env OPENAI_API_KEY --workers 4 --max-steps 50 --out runs/agent
  passnet agent run tasks/* --policy library --out runs/library     # no model: the baseline
  passnet agent run eval-fusible --policy library --tasks 20 --device cuda \\
      --out runs/eval-fusible-library           # a benchmark row: passnet bench table reads it
Re-running the same command resumes: episodes already in OUT/trajectories.jsonl are skipped.
Given a split (a split name of the shipped benchmark, a split folder, or a benchmark folder
with --split) instead of task folders, the run is a benchmark run like passnet bench eval's:
one episode per task (--tasks K: the same sample of K tasks bench eval takes), and OUT holds
tasks.json and the records of each task's submitted pass directory (results.jsonl), the
run's table, aggregated_score.json and report.html. docs/agent.md, docs/bench.md.
"""

EXPORT_EXAMPLES = """\
examples:
  passnet agent export runs/agent --min-reward 0.1 --format openai --out sft.jsonl
  passnet agent export runs/a runs/b/trajectories.jsonl --format sharegpt --out sft_sharegpt.jsonl
"""

SERVE_EXAMPLES = """\
examples:
  export PASSNET_SERVE_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(16))')
  passnet serve tasks/* --port 8757
  curl -H "Authorization: Bearer $PASSNET_SERVE_TOKEN" localhost:8757/tasks
See docs/agent.md for the API.
"""


def _settings(args: argparse.Namespace) -> Any:
    from passnet.evaluate import EvalSettings

    defaults = EvalSettings()
    try:
        return EvalSettings(
            warmup=defaults.warmup if args.warmup is None else args.warmup,
            trials=defaults.trials if args.trials is None else args.trials,
            min_warmup_s=defaults.min_warmup_s if args.warmup is None else 0.0,
            adaptive=args.trials is None,
            timeout_s=args.timeout,
            num_threads=args.threads,
        )
    except ValueError as exc:
        raise PassnetError(f"--warmup/--trials/--timeout/--threads: {exc}") from exc


def _cmd_run(args: argparse.Namespace, console: Any) -> int:
    # Everything that can stop the command is checked before any episode starts.
    if args.policy == "model":
        from passnet.agent import check_endpoint_options, require_openai

        require_openai()
        check_endpoint_options(args.model, args.base_url)
    from passnet.agent import EnvConfig, LibraryPolicy, OpenAIPolicy, quick_settings, run_agent

    final = _settings(args)
    quick = quick_settings(final)
    if args.eval_warmup is not None or args.eval_trials is not None:
        from passnet.evaluate import EvalSettings

        warmup = quick.warmup if args.eval_warmup is None else args.eval_warmup
        trials = quick.trials if args.eval_trials is None else args.eval_trials
        try:
            quick = EvalSettings(**{**quick.to_dict(), "warmup": warmup, "trials": trials})
        except ValueError as exc:
            raise PassnetError(f"--eval-warmup/--eval-trials: {exc}") from exc
    config = EnvConfig(
        device=args.device,
        max_steps=args.max_steps,
        max_wall_s=args.max_wall_s,
        final_settings=final,
        eval_settings=quick,
    )
    if args.policy == "library":

        def make_policy() -> Any:
            return LibraryPolicy(b=config.b)

    else:

        def make_policy() -> Any:
            return OpenAIPolicy(
                args.model,
                args.base_url,
                api_key_env=args.api_key_env,
                temperature=args.temperature,
                max_reply_tokens=args.max_reply_tokens,
            )

    split = _split_of(args)  # before any work: a bad SPLIT or --tasks stops the command
    options = {
        "config": config,
        "workers": args.workers,
        "jobs": args.jobs,
        "max_tokens": args.max_tokens,
    }
    if split is None:
        summary = run_agent(args.tasks, make_policy, args.out or "agent-out", **options)
        return _print_episodes(summary, console)
    from passnet.agent import run_agent_split
    from passnet.cli._bench_eval import default_out, split_line, write_bench_results
    from passnet.record import BASELINE_T

    policy = make_policy().name
    out = Path(args.out) if args.out else default_out(split.name, policy, None)
    console.print(
        f"{split_line(split)}, one {policy} episode per task → {out}",
        highlight=False,
        markup=False,
    )
    try:
        run = run_agent_split(split, make_policy, out, **options)
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted: the finished tasks' records and trajectories are saved; "
            "rerun the command to resume"
        )
        raise
    status = _print_episodes(run.agent, console)
    console.print(
        f"results: {run.out_dir / 'results.jsonl'} ({len(run.records)} of "
        f"{run.index.graph_count()} graphs: each task's submitted pass directory; "
        "tasks.json names each graph's task)"
    )
    # (an empty pass directory's graphs are pass_mismatch, not "ran": still a scored row)
    write_bench_results(run, f"{policy} on {run.index.device}", BASELINE_T, console)
    return status


def _split_of(args: argparse.Namespace) -> Any:
    """The split (or its sample) that TASK... names, or None where they are task folders.

    Task folders (each holding graph_list.txt) run as they are; anything else must be one
    split, resolved as ``passnet bench eval`` resolves SPLIT. --split and --tasks need a
    split."""
    from passnet.task import is_task_folder

    if all(is_task_folder(t) for t in args.tasks):
        for option, value in (("--tasks", args.sample), ("--split", args.split)):
            if value is not None:
                raise PassnetError(
                    f"{option} needs a split: give one split (a split name of the shipped "
                    "benchmark such as eval-fusible, a split folder, or a benchmark folder "
                    "with --split NAME) instead of task folders"
                )
        return None
    if len(args.tasks) > 1:
        first = next(t for t in args.tasks if not is_task_folder(t))
        raise PassnetError(
            "not a task folder (no graph_list.txt): give task folders, or one split alone",
            path=first,
        )
    from passnet.dataset import open_split

    spec = args.tasks[0]
    if not Path(spec).exists() and ("/" in spec or "\\" in spec):
        raise PassnetError("no such task folder, split or benchmark folder", path=spec)
    return open_split(spec, args.split, args.sample)


def _print_episodes(summary: Any, console: Any) -> int:
    """Each episode's line, the failed ones, what was resumed; 1 where an episode failed."""
    for t in summary.trajectories:
        console.print(
            f"{t.task}: {t.stop_reason} after {t.steps} steps, reward {t.reward:.4f} "
            f"(best {t.best_reward:.4f}), {t.tokens} tokens, {t.wall_s:.0f} s",
            markup=False,
            highlight=False,
        )
    for task, error in summary.failed:
        print_error(f"{task}: {error}")
    if summary.skipped:
        console.print(f"resumed: {summary.skipped} episode(s) already in {summary.out_dir}")
    console.print(f"trajectories: {summary.out_dir / 'trajectories.jsonl'}")
    return 1 if summary.failed else 0


def _cmd_export(args: argparse.Namespace, console: Any) -> int:
    from pathlib import Path

    from passnet.agent import DEFAULT_MIN_REWARD, TRAJECTORIES_FILE, export_trajectories

    for source in args.sources:
        path = Path(source)
        if not (path / TRAJECTORIES_FILE if path.is_dir() else path).is_file():
            raise PassnetError(f"no {TRAJECTORIES_FILE} there", file=source)
    min_reward = DEFAULT_MIN_REWARD if args.min_reward is None else args.min_reward
    count = export_trajectories(args.sources, args.out, min_reward=min_reward, fmt=args.format)
    console.print(f"exported {count} trajectories with reward >= {min_reward:g} to {args.out}")
    return 0


def _cmd_serve(args: argparse.Namespace, console: Any) -> int:
    token = os.environ.get(args.token_env)
    if not token:
        raise PassnetError(
            f"set the environment variable {args.token_env} to the token clients must send "
            "(at least 16 characters; e.g. python -c 'import secrets; print(secrets.token_hex(16))')"
        )
    from passnet.agent import RewardServer, ServeConfig
    from passnet.task import load_task

    config = ServeConfig(
        token=token,
        host=args.host,
        port=args.port,
        max_request_bytes=args.max_request_kb * 1024,
        max_concurrent=args.max_concurrent,
        max_pending=args.max_pending,
        device=args.device,
        settings=_settings(args),
    )
    server = RewardServer([load_task(t) for t in args.tasks], config)
    host, port = server.address
    console.print(f"serving {len(server.tasks)} task(s) on http://{host}:{port} (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def _timing_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument(
        "--warmup", type=int, default=None, help=f"warm-up calls per side {what} (default: 25)"
    )
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help=f"timed calls per side {what} (default: 100 with adaptive repetition)",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per graph (default: 600)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads per evaluation")


def add_commands(subparsers: Any) -> None:
    """Register ``agent`` (run, export) and ``serve``."""
    agent = subparsers.add_parser(
        "agent", help="PassAgent: LLM (or library) agents write passes; trajectories for SFT/RL"
    )
    sub = agent.add_subparsers(dest="agent_command", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "run",
        help="run agent episodes on tasks through an OpenAI-compatible endpoint",
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "tasks",
        nargs="+",
        metavar="TASK",
        help="task folders; or one split (a split name of the shipped benchmark such as "
        "eval-fusible, a split folder, or a benchmark folder with --split): a benchmark run "
        "whose folder passnet bench table reads",
    )
    p.add_argument("--split", default=None, metavar="NAME", help="the split of benchmark TASK")
    p.add_argument(
        "--tasks",
        dest="sample",
        type=int,
        default=None,
        metavar="K",
        help="on a split: a sample of K tasks, the same tasks as passnet bench eval --tasks K "
        "(the first K of the split's sample order; a larger K resumes a run of a smaller "
        "one; the table gives 95%% intervals) (default: all)",
    )
    p.add_argument(
        "--policy",
        choices=("model", "library"),
        default="model",
        help="model: a chat model (default); library: the reference-pass baseline, no model",
    )
    p.add_argument("--model", help="model name at the endpoint")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature")
    p.add_argument("--max-reply-tokens", type=int, default=None, help="max tokens per reply")
    p.add_argument("--max-steps", type=int, default=50, help="actions per episode (default: 50)")
    p.add_argument("--max-tokens", type=int, default=None, help="model tokens per episode")
    p.add_argument("--max-wall-s", type=float, default=None, help="wall seconds per episode")
    p.add_argument("--workers", type=int, default=1, help="episodes at once (default: 1)")
    p.add_argument(
        "--jobs", type=int, default=1, help="evaluations at once (on CUDA: GPUs; default: 1)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default: ./agent-out; on a split ./passnet-bench/SPLIT.POLICY, "
        "POLICY library or the model's name)",
    )
    _timing_options(p, "in the final evaluation of a submission")
    p.add_argument(
        "--eval-warmup", type=int, default=None, help="pass_evaluator's warm-up calls (default: 5)"
    )
    p.add_argument(
        "--eval-trials", type=int, default=None, help="pass_evaluator's timed calls (default: 20)"
    )
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "export",
        help="write the trajectories with a reward of at least X as an SFT set",
        epilog=EXPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="run folders or trajectories.jsonl")
    p.add_argument(
        "--min-reward",
        type=float,
        default=None,
        metavar="X",
        help="keep the episodes with reward >= X (default: 0, every episode whose submitted "
        "passes ran: a rejected or unevaluable pass, or no submission, earns -1)",
    )
    p.add_argument(
        "--format",
        choices=("openai", "sharegpt"),
        default="openai",
        help="openai: {messages, tools} per line, OpenAI's chat fine-tuning format with "
        "tools (default); sharegpt: LLaMA-Factory's ShareGPT {conversations, system, tools} "
        "with function_call turns",
    )
    p.add_argument("--out", required=True, help="output JSON Lines file")
    p.set_defaults(func=_cmd_export)

    p = subparsers.add_parser(
        "serve",
        help="serve the evaluation as an authenticated HTTP reward endpoint",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("tasks", nargs="+", metavar="TASK", help="task folders to serve")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8757, help="port (default: 8757; 0: any free)")
    p.add_argument(
        "--token-env",
        default="PASSNET_SERVE_TOKEN",
        help="environment variable holding the token (default: PASSNET_SERVE_TOKEN)",
    )
    p.add_argument(
        "--max-request-kb", type=int, default=1024, help="largest request body (default: 1024)"
    )
    p.add_argument("--max-concurrent", type=int, default=1, help="evaluations at once (default: 1)")
    p.add_argument(
        "--max-pending", type=int, default=8, help="requests waiting for a turn (default: 8)"
    )
    _timing_options(p, "for timing 'full'")
    p.set_defaults(func=_cmd_serve)
