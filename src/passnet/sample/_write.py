"""Write a sample folder in the GraphNet layout (all six files)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from passnet.sample._constraints import Constraints, render_constraints_file
from passnet.sample._meta import TensorMeta, render_meta_file
from passnet.sample._sample import GRAPH_NET_FILE, HASH_FILE

__all__ = ["write_graph_net", "write_sample"]


def write_sample(
    path: str | Path,
    model_source: str,
    weight_metas: list[TensorMeta],
    *,
    input_metas: list[TensorMeta] | None = None,
    constraints: Constraints | None = None,
    graph_net: dict[str, Any] | None = None,
    graph_hash: str | None = None,
) -> Path:
    """Create ``path`` with model.py, weight_meta.py, input_meta.py,
    input_tensor_constraints.py, graph_net.json and graph_hash.txt.

    ``graph_hash`` defaults to the SHA-256 of ``model_source``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.py").write_text(model_source)
    (path / "weight_meta.py").write_text(render_meta_file(weight_metas))
    (path / "input_meta.py").write_text(render_meta_file(input_metas or []))
    (path / "input_tensor_constraints.py").write_text(
        render_constraints_file(constraints or Constraints())
    )
    write_graph_net(path, graph_net or {"framework": "torch"})
    (path / HASH_FILE).write_text(graph_hash or hashlib.sha256(model_source.encode()).hexdigest())
    return path


def write_graph_net(path: str | Path, graph_net: dict[str, Any]) -> Path:
    """Write a sample folder's ``graph_net.json`` (indent 4, keys in the order given: what
    :func:`write_sample` writes). Returns the file's path."""
    target = Path(path) / GRAPH_NET_FILE
    target.write_text(json.dumps(graph_net, indent=4) + "\n")
    return target
