"""The task prompt: the system message (what a pass is, the rules, the tools, the goal)
and the user message (this task's graphs and pass directory)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from passnet.errors import SampleError
from passnet.sample import load_sample
from passnet.task import MANIFEST_FILE, Task

__all__ = ["SYSTEM_PROMPT", "task_dtypes", "task_messages"]

SYSTEM_PROMPT = f"""\
You are PassAgent, a compiler engineer who writes graph-rewrite passes that make real \
PyTorch computation graphs run faster than PyTorch eager, as fast as TorchInductor or faster.

A pass is a Python file in pass_dir with three functions:
  def pattern(in_0, in_1, ...): the subgraph to find, written with PyTorch calls exactly as \
the graph's model.py writes them (it is traced, never run on data); it may return a tuple.
  def replacement_args(in_0, in_1, ...): returns the replacement's arguments: the pattern's \
parameters selected and reordered, plus literals. No computation.
  def replacement_func(): returns a module-level function of pass_dir (by name) that \
computes what the pattern returns, by launching Triton kernels (@triton.jit).
{MANIFEST_FILE} lists the pass files to load, in order, by name without .py \
(["FuseAddNorm"]). Helper modules of pass_dir import as `from pass_dir.kernels import k`. \
Every .py file in pass_dir is checked, and one the manifest does not list is checked as \
a helper (its pattern is no exemption): remove files you stop using (undo_edit of a \
file's creation deletes it).

Rules (checked; a violation ends as pass_rejected and the lowest reward): outside \
`pattern` and Triton kernels, torch may only allocate tensors (torch.empty, empty_like, \
zeros, ...) and read metadata (shape, stride, dtype, device); views and .contiguous() are \
allowed; the computation itself must happen in Triton kernels. Only torch, triton, \
triton.language, math and typing may be imported. No state kept between calls, no files, \
no threads or streams, no eval/getattr, no dunders, no writes into inputs. Outputs must \
match PyTorch eager within tolerance on fresh inputs, in every dtype of the task.

Tools: inspect_graph shows a graph's operations with shapes and dtypes and which \
operations Inductor fuses into one kernel; file_editor edits files in pass_dir; \
pass_evaluator runs the real evaluation (matching, correctness, performance, and the \
score AS); submit ends the episode, and the final reward is a fresh evaluation of \
pass_dir with full timing. The score AS aggregates the speedup over eager across \
tolerance levels: correct and faster is best, correct and slower is penalized, wrong is \
worse. Work in small steps: inspect, write a pass for a fusible subgraph, evaluate, fix, \
improve, and submit when you are done. Call exactly one tool per reply when you can."""


def task_dtypes(task: Task) -> dict[str, str]:
    """Each graph entry's dtype: what ``task.json`` records, else the most common floating
    dtype of the sample's tensors ("?" when there is none or the sample is unreadable)."""
    out = {}
    metadata = task.graph_metadata or ({},) * len(task.graphs)
    for entry, graph, meta in zip(task.graph_entries, task.graphs, metadata):
        if isinstance(meta.get("dtype"), str):
            out[entry] = meta["dtype"]
            continue
        try:
            metas = load_sample(graph).weight_metas
        except SampleError:
            out[entry] = "?"
            continue
        floats = Counter(
            str(m.dtype).removeprefix("torch.") for m in metas if m.dtype.is_floating_point
        )
        out[entry] = floats.most_common(1)[0][0] if floats else "?"
    return out


def task_messages(
    task: Task, files: Mapping[str, str], dtypes: Mapping[str, str], device: str
) -> list[dict[str, Any]]:
    """The first two messages of an episode: the system prompt and the task."""
    graphs = "\n".join(f"  {entry}  [{dtypes.get(entry, '?')}]" for entry in task.graph_entries)
    listing = "\n".join(f"  {name} ({len(text)} characters)" for name, text in files.items())
    const = (
        f"\nFixed passes applied before yours (const_pass_dir): {', '.join(task.const_pass_names)}."
        if task.const_pass_names
        else ""
    )
    user = (
        f"Task {task.name}: write passes that speed up these {len(task.graphs)} graph(s) on "
        f"{device} while keeping their outputs correct:\n{graphs}\n"
        f"pass_dir now holds:\n{listing or '  (nothing)'}{const}\n"
        "Start by inspecting a graph."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
