"""``inspect_graph``: a task graph's operations, shapes and dtypes, and how Inductor fuses it.

The graph is traced with the one tracer and run once on replayed inputs (shapes by
``torch.fx``'s shape propagation), and Inductor's code generation lists its kernels
(:func:`passnet.dataset.analyze_fusible`: each kernel mapped back to the operations it
computes). The work runs in a disposable child process (:func:`passnet.isolate.run_isolated`):
a graph that crashes Inductor costs the tool call, not the episode. Answers are cached
per graph folder and device for the life of the process.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

__all__ = ["inspect_graph"]

log = logging.getLogger(__name__)

_MAX_INPUTS = 40
_cache: dict[tuple[str, str, int], str] = {}
_lock = threading.Lock()


def inspect_graph(
    graph: Path, label: str, *, device: str = "cpu", max_nodes: int = 200, timeout_s: float = 600
) -> str:
    """The text ``inspect_graph`` answers with for the sample folder ``graph``."""
    from passnet.evaluate import FORKSERVER_PRELOAD
    from passnet.isolate import run_isolated

    key = (str(Path(graph).resolve()), device, max_nodes)
    with _lock:
        if key in _cache:
            return _cache[key]
    outcome = run_isolated(
        _inspect_child,
        (str(graph), label, device, max_nodes),
        timeout_s,
        preload=FORKSERVER_PRELOAD,
    )
    if outcome.result is None:
        why = (
            "timed out"
            if outcome.timed_out
            else f"died ({outcome.signal_name or outcome.exitcode})"
        )
        return f"cannot inspect {label}: the inspection process {why}"
    text = str(outcome.result["text"])
    with _lock:
        _cache[key] = text
    return text


def _shape(meta: Any) -> str:
    """``float32[2, 4]`` for a tensor's metadata (``TensorMetadata`` or a tensor), a tuple of
    them for several results."""
    shape, dtype = getattr(meta, "shape", None), getattr(meta, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{str(dtype).removeprefix('torch.')}{list(shape)}"
    if isinstance(meta, (tuple, list)):
        return "(" + ", ".join(_shape(m) for m in meta) + ")"
    return type(meta).__name__ if meta is not None else "-"


def _inspect_child(path: str, label: str, device: str, max_nodes: int, send: Any) -> None:
    """In the child: trace, propagate shapes, list Inductor's kernels; send the text."""
    import torch
    from torch.fx.passes.shape_prop import ShapeProp

    from passnet.dataset import trace_parent
    from passnet.sample import format_node

    send(("stage", "inspect"))
    try:
        parent = trace_parent(path, device=device)
    except Exception as exc:  # noqa: BLE001 - the tool reports any failure of the graph
        send(("result", {"text": f"cannot inspect {label}: {type(exc).__name__}: {exc}"}))
        return
    gm = parent.gm
    inputs = parent.replay_inputs()
    lines: list[str] = []
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as exc:  # noqa: BLE001 - shapes are a nicety; the op list still helps
        lines.append(f"(shapes unavailable: {type(exc).__name__}: {exc})")
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    body = [n for n in nodes if n.op not in ("placeholder", "output")]
    lines.insert(
        0, f"graph {label}: {len(parent.units)} operations, {len(placeholders)} inputs ({device})"
    )
    lines.append("inputs:")
    for node in placeholders[:_MAX_INPUTS]:
        lines.append(f"  {node.name}: {_shape(node.meta.get('tensor_meta', node.meta.get('val')))}")
    if len(placeholders) > _MAX_INPUTS:
        lines.append(f"  ... {len(placeholders) - _MAX_INPUTS} more inputs")
    lines.append("operations (result shape and dtype):")
    for node in body[:max_nodes]:
        lines.append(f"  {format_node(node)}  # {_shape(node.meta.get('tensor_meta'))}")
    if len(body) > max_nodes:
        lines.append(f"  ... {len(body) - max_nodes} more operations (raise max_nodes to see them)")
    output = next((n for n in nodes if n.op == "output"), None)
    if output is not None:
        lines.append(f"  {format_node(output)}")
    lines += _kernels(parent)
    send(("result", {"text": "\n".join(lines)}))


def _kernels(parent: Any) -> list[str]:
    from passnet.dataset import analyze_fusible

    try:
        analysis = analyze_fusible(parent)
    except Exception as exc:  # noqa: BLE001 - Inductor failing on the graph is an answer too
        return [f"Inductor: code generation failed ({type(exc).__name__}: {exc})"]
    kernels = analysis.kernels
    extern = [k for k in kernels if k.extern]
    names = ", ".join(sorted({s for k in extern for s in k.sources}))[:300]
    lines = [
        f"Inductor: {len(kernels)} kernels: {len(kernels) - len(extern)} generated (fused "
        f"loops), {len(extern)} extern calls{f' ({names})' if names else ''}"
    ]
    spans = [
        seg
        for seg, fused in zip(analysis.segments, analysis.fused)
        if fused and seg.stop - seg.start >= 2
    ]
    for seg in spans[:20]:
        ops = [parent.units[i].op for i in range(seg.start, seg.stop)]
        shown = ", ".join(ops[:12]) + (", ..." if len(ops) > 12 else "")
        lines.append(f"  fused span: operations {seg.start}-{seg.stop - 1} ({shown})")
    if len(spans) > 20:
        lines.append(f"  ... {len(spans) - 20} more fused spans")
    return lines
