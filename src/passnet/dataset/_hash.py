"""A canonical graph hash: independent of variable names, devices and torch version.

The hash covers what makes two graphs the same computation:

* the inputs the graph uses, numbered by first use (not by name or position), each
  with its shape and dtype (a SymInt input: its value);
* every call node in graph order: its canonical operator name (see
  :func:`~passnet.dataset.canonical_op_name`), its arguments with node references
  replaced by those numbers, constants encoded by value;
* which nodes are returned.

Nothing version- or run-dependent enters it: no variable names, no ``repr`` of
Python objects, no devices (a sample is the same graph on CPU and CUDA), no
message strings of assertion ops (they quote variable names). Parameters the
graph never reads do not enter it either (Dynamo sometimes passes unused SymInts).

Two samples written by different Dynamo versions can still hash differently where
the files really differ (e.g. one spells out a default argument the other omits).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from passnet.errors import DatasetError, PassnetError
from passnet.sample import (
    PADDLE,
    Sample,
    TensorMeta,
    canonical_op_name,
    dtype_to_str,
    load_sample,
    trace_sample,
)
from passnet.status import Status

__all__ = [
    "HASH_VERSION",
    "CanonicalGraph",
    "HashResult",
    "InputSpec",
    "canonical_graph",
    "graph_hash",
    "hash_samples",
    "is_assertion_op",
]

log = logging.getLogger(__name__)

HASH_VERSION = "passnet-graph-hash-v1"
"""Salt of the hash; changes only if the canonical form changes."""

_ASSERTION_OPS = frozenset(
    {
        "torch._assert",
        "torch._check",
        "torch._check_is_size",
        "torch._check_index",
        "torch._check_value",
        "torch._check_type",
        "torch._check_with",
        "torch._check_not_implemented",
        "torch._check_tensor_all",
        "torch._check_tensor_all_with",
        "torch.ops.aten._assert_scalar.default",
        "torch.ops.aten._assert_async.default",
        "torch.ops.aten._assert_async.msg",
    }
)


def is_assertion_op(op: str) -> bool:
    """True for runtime checks (``torch._check*``, ``aten._assert_*``): they compute nothing."""
    return op in _ASSERTION_OPS


@dataclass(frozen=True)
class InputSpec:
    """A graph input as the hash sees it."""

    shape: tuple[int, ...]
    dtype: str
    symint: int | None = None
    """The value of a SymInt input (None for tensors)."""


@dataclass
class CanonicalGraph:
    """The name-independent form of a sample's graph, and its hash."""

    inputs: list[InputSpec]
    nodes: list[list[Any]]
    """One ``[op, args, kwargs]`` per call node, references as ``"in<k>"`` / ``"%<k>"``."""
    outputs: list[Any]
    ops: list[str] = field(default_factory=list)
    """Canonical operator names of the call nodes, in order."""

    def to_json(self) -> str:
        """The exact text that is hashed."""
        body = {
            "version": HASH_VERSION,
            "inputs": [[list(i.shape), i.dtype, i.symint] for i in self.inputs],
            "nodes": self.nodes,
            "outputs": self.outputs,
        }
        return json.dumps(
            body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )

    @property
    def graph_hash(self) -> str:
        """64 lowercase hex characters (SHA-256 of :meth:`to_json`)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def _encode(value: Any, refs: dict[torch.fx.Node, str], drop_strings: bool) -> Any:
    """A JSON value for an argument; floats as their repr so NaN/inf/-0.0 stay exact."""
    if isinstance(value, torch.fx.Node):
        return refs[value]
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return {"f": repr(value)}
    if isinstance(value, str):
        return None if drop_strings else {"s": value}
    if isinstance(value, (list, tuple)):
        return [_encode(v, refs, drop_strings) for v in value]
    if isinstance(value, dict):
        return {
            "d": [
                [str(k), _encode(v, refs, drop_strings)] for k, v in sorted(value.items(), key=str)
            ]
        }
    if isinstance(value, slice):
        return {
            "slice": [_encode(v, refs, drop_strings) for v in (value.start, value.stop, value.step)]
        }
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_to_str(value)}
    if isinstance(value, torch.device):
        return {"device": True}
    if isinstance(value, (torch.memory_format, torch.layout)):
        return {"enum": str(value)}
    if isinstance(value, complex):
        return {"c": repr(value)}
    if isinstance(value, torch.Tensor):
        return {"tensor": [list(value.shape), dtype_to_str(value.dtype)]}
    return {"object": type(value).__qualname__}


def _input_spec(meta: TensorMeta | None, name: str, sample: Sample) -> InputSpec:
    if meta is None:
        raise DatasetError("graph input has no metadata", sample=sample.path, field=name)
    if sample.is_symint(name):
        value = meta.data[0] if meta.data else meta.mean
        return InputSpec((), "torch.SymInt", int(value) if value is not None else None)
    return InputSpec(tuple(meta.shape), dtype_to_str(meta.dtype))


def canonical_graph(
    sample: Sample | str | Path, gm: torch.fx.GraphModule | None = None
) -> CanonicalGraph:
    """The canonical form of a sample's graph (``gm``: its trace, if already at hand).

    Raises :class:`~passnet.errors.SampleError` for an unloadable sample and
    :class:`~passnet.errors.DatasetError` for an untraceable one.
    """
    if not isinstance(sample, Sample):
        sample = load_sample(sample)
    if sample.framework == PADDLE:  # read from model.py's syntax tree: no Paddle needed
        from passnet.dataset._hash_paddle import paddle_canonical_graph

        return paddle_canonical_graph(sample)
    if gm is None:
        gm = trace_sample(sample)
    refs: dict[torch.fx.Node, str] = {}
    inputs: list[InputSpec] = []
    metas = sample.metas

    def ref_inputs(value: Any) -> Any:
        if isinstance(value, torch.fx.Node) and value.op == "placeholder" and value not in refs:
            refs[value] = f"in{len(inputs)}"
            inputs.append(_input_spec(metas.get(str(value.target)), str(value.target), sample))
        return value

    nodes: list[list[Any]] = []
    ops: list[str] = []
    outputs: list[Any] = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            # A constant of the module: identified by shape and dtype, not by its name.
            refs[node] = json.dumps(_encode(getattr(gm, str(node.target), None), refs, False))
        elif node.op == "output":
            torch.fx.node.map_aggregate(node.args, ref_inputs)
            outputs = _encode(node.args[0], refs, False)
        elif node.op != "placeholder":
            torch.fx.node.map_aggregate((node.args, node.kwargs), ref_inputs)
            op = canonical_op_name(node) or node.op
            drop = is_assertion_op(op)
            args = _encode(node.args, refs, drop)
            kwargs = {k: _encode(v, refs, drop) for k, v in sorted(node.kwargs.items())}
            refs[node] = f"%{len(nodes)}"
            nodes.append([op, args, kwargs])
            ops.append(op)
    return CanonicalGraph(inputs, nodes, outputs, ops)


def graph_hash(sample: Sample | str | Path) -> str:
    """The canonical hash of a sample (64 hex characters)."""
    return canonical_graph(sample).graph_hash


@dataclass
class HashResult:
    """Hash of one sample, or why there is none."""

    sample: str
    status: Status
    graph_hash: str = ""
    """The canonical hash: passnet's structural hash of the graph (dedup's key)."""
    op_count: int = 0
    error: str = ""
    file_hash: str = ""
    """The sample's own ``graph_hash.txt`` (GraphNet's hash; the sha256 of ``model.py``
    where the file is missing), which evaluation records carry as their ``graph_hash``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample": self.sample,
            "status": self.status.value,
            "graph_hash": self.graph_hash,
            "file_hash": self.file_hash,
            "op_count": self.op_count,
            "error": self.error,
        }


def hash_samples(
    paths: Iterable[str | Path], on_result: Callable[[HashResult], None] | None = None
) -> list[HashResult]:
    """Hash every sample; a sample that cannot be hashed is a ``sample_error`` result, and
    the others carry on."""
    results = []
    for path in paths:
        try:
            sample = load_sample(path)
            graph = canonical_graph(sample)
            result = HashResult(
                str(path),
                Status.OK,
                graph.graph_hash,
                len(graph.ops),
                file_hash=sample.graph_hash,
            )
        except PassnetError as exc:
            log.warning("cannot hash %s: %s", path, exc)
            result = HashResult(str(path), Status.SAMPLE_ERROR, error=str(exc))
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
