"""A GraphNet sample: the six files of one computation graph, loaded and replayable."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from passnet.errors import SampleError
from passnet.sample._constraints import Constraints, parse_constraints_file
from passnet.sample._graph import trace_graph
from passnet.sample._meta import TensorMeta, parse_meta_file
from passnet.sample._model import compile_model_source, forward_parameters
from passnet.sample._paddle import PADDLE, TORCH, model_dir, sample_framework
from passnet.sample._replay import ParamUsage, analyze_usage, name_heuristics, replay_value

__all__ = ["Sample", "is_module_state", "load_sample", "recorded_hash"]

log = logging.getLogger(__name__)

MODEL_FILE = "model.py"
WEIGHT_META_FILE = "weight_meta.py"
INPUT_META_FILE = "input_meta.py"
CONSTRAINTS_FILE = "input_tensor_constraints.py"
GRAPH_NET_FILE = "graph_net.json"
HASH_FILE = "graph_hash.txt"
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
# The four files a sample may lack, and what stands in for each.
OPTIONAL_FILES = {
    INPUT_META_FILE: "every forward parameter must be described in weight_meta.py",
    CONSTRAINTS_FILE: "inputs are replayed without constraints",
    GRAPH_NET_FILE: "no metadata",
    HASH_FILE: "the graph hash is that of model.py",
}


def missing_optional_files(path: Path) -> tuple[str, ...]:
    """The optional files (:data:`OPTIONAL_FILES`) that the sample folder lacks (a
    ``shape_patches_*`` variant's ``graph_net.json`` and ``graph_hash.txt`` are its parent's;
    Paddle samples have no ``input_tensor_constraints.py`` in their format)."""
    home = model_dir(Path(path))
    expected = OPTIONAL_FILES
    if sample_framework(Path(path)) == PADDLE:
        expected = {k: v for k, v in OPTIONAL_FILES.items() if k != CONSTRAINTS_FILE}
    return tuple(
        name
        for name in expected
        if not ((home if name in (GRAPH_NET_FILE, HASH_FILE) else Path(path)) / name).is_file()
    )


@dataclass
class Sample:
    """One GraphNet sample folder, parsed. Build the module and inputs on any device."""

    path: Path
    model_source: str
    params: list[tuple[str, str]]
    """``forward`` parameters in order: (name, annotation)."""
    weight_metas: list[TensorMeta]
    input_metas: list[TensorMeta] = field(default_factory=list)
    constraints: Constraints | None = None
    graph_net: dict[str, Any] = field(default_factory=dict)
    graph_hash: str = ""
    missing_files: tuple[str, ...] = ()
    """The optional files (:data:`OPTIONAL_FILES`) that the folder lacks."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def framework(self) -> str:
        """``"torch"`` or ``"paddle"`` (:func:`passnet.sample.sample_framework`'s rule, on what
        was loaded)."""
        declared = self.graph_net.get("framework")
        if isinstance(declared, str):
            return PADDLE if declared.strip().lower() == PADDLE else TORCH
        return PADDLE if "paddle.nn.Layer" in self.model_source else TORCH

    @functools.cached_property
    def metas(self) -> dict[str, TensorMeta]:
        return {m.name: m for m in [*self.weight_metas, *self.input_metas]}

    @property
    def param_names(self) -> list[str]:
        return [name for name, _ in self.params]

    @property
    def module_state_positions(self) -> list[int]:
        """Positions of the forward parameters that are the captured module's state (its
        parameters, buffers and attributes: :func:`is_module_state`), not its inputs."""
        return [i for i, name in enumerate(self.param_names) if is_module_state(name)]

    def is_symint(self, name: str) -> bool:
        return dict(self.params)[name].endswith("SymInt")

    @property
    def tensor_bytes(self) -> int:
        """Bytes of the tensors its forward takes (weights and inputs), from the metadata:
        what one replay of its inputs allocates."""
        metas = self.metas
        return sum(
            metas[name].numel * metas[name].dtype.itemsize
            for name in self.param_names
            if name in metas and not self.is_symint(name)
        )

    def module_class(self, device: str = "cpu") -> type[torch.nn.Module]:
        return compile_model_source(
            self.model_source, device, str(self.path / MODEL_FILE), self.path
        )

    def build_module(self, device: str = "cpu") -> torch.nn.Module:
        """Instantiate ``GraphModule`` with devices rewritten to ``device``, in eval mode."""
        return self.module_class(device)().eval()

    def fx_graph(self) -> torch.fx.GraphModule:
        """Symbolically trace ``GraphModule`` (on CPU) into an FX graph.

        Constant factories are folded (as plain ``symbolic_trace`` does): the graph
        serves the analysis of how inputs are used, which must not change with it.
        """
        module = self.build_module("cpu")
        try:
            return trace_graph(module, locations=False, keep_factories=False)
        except Exception as exc:  # noqa: BLE001 - tracing failures are reported as sample errors
            raise SampleError(
                f"cannot trace model.py with torch.fx: {type(exc).__name__}: {exc}",
                sample=self.path,
                file=MODEL_FILE,
            ) from exc

    @functools.cached_property
    def usage(self) -> dict[str, ParamUsage]:
        """Value constraints of each parameter (traced; name heuristics if tracing fails)."""
        found: dict[str, ParamUsage] = {}
        try:
            found = analyze_usage(self.fx_graph(), self.metas)
        except SampleError as exc:
            log.debug("usage analysis falls back to names for %s: %s", self.path, exc)
        out = {}
        for name in self.param_names:
            u = found.get(name, ParamUsage())
            h = name_heuristics(name)
            out[name] = dataclasses.replace(u, positive=u.positive or h.positive)
        return out

    def replay_inputs(self, device: str = "cpu", seed: int = 0) -> list[Any]:
        """The forward arguments, built deterministically from metadata and ``seed``."""
        values = []
        for name in self.param_names:
            meta = self.metas[name]
            try:
                value = replay_value(meta, self.usage[name], seed, self.is_symint(name))
            except (ValueError, RuntimeError, TypeError) as exc:
                raise SampleError(
                    f"cannot build a value from metadata: {exc}",
                    sample=self.path,
                    file=WEIGHT_META_FILE,
                    field=name,
                ) from exc
            values.append(value.to(device) if isinstance(value, torch.Tensor) else value)
        return values


_MODULE_STATE = re.compile(r"^l_self_|(^|_)(parameters|buffers)_", re.IGNORECASE)


def is_module_state(name: str) -> bool:
    """Whether a forward parameter named ``name`` was the captured module's own state.

    GraphNet samples pass a model's weights to ``forward`` like its inputs, and mostly
    describe both in weight_meta.py; Dynamo's names tell them apart: a module's
    parameters and buffers are lifted as ``L_self_..._parameters_...`` and
    ``..._buffers_...``, its other attributes (``eps``, ``dropout_p``) as ``L_self_...``,
    while the model's inputs are ``L_x_``, ``L_input_ids_``, ``L_args_0_``, ``s0``...
    """
    return bool(_MODULE_STATE.search(name))


def _read_text(path: Path, sample: Path, required: bool) -> str | None:
    if not path.is_file():
        if required:
            raise SampleError(f"missing file {path.name}", sample=sample, file=path.name)
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SampleError(f"cannot read {path.name}: {exc}", sample=sample, file=path.name) from exc


def recorded_hash(path: str | Path) -> str:
    """The hash in a sample folder's ``graph_hash.txt``, read without loading the sample
    (whose metadata can take a second to parse); "" when there is none."""
    try:
        return (Path(path) / HASH_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def sample_digest(path: str | Path) -> str:
    """SHA-256 of the files that decide an evaluation (model.py and the meta and
    constraint files), whether or not they parse: ``graph_hash.txt`` names the graph
    and does not change when a sample is edited or repaired."""
    h = hashlib.sha256()
    for name in (MODEL_FILE, WEIGHT_META_FILE, INPUT_META_FILE, CONSTRAINTS_FILE):
        # a shape_patches_* variant's model.py is its parent's
        file = (model_dir(Path(path)) if name == MODEL_FILE else Path(path)) / name
        if file.is_file():
            data = file.read_bytes()
            h.update(f"{name}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def load_sample(path: str | Path) -> Sample:
    """Read and check a sample folder. Every problem is a :class:`SampleError` naming file and field.

    A ``shape_patches_*`` folder of a Paddle subgraph (:func:`passnet.sample.is_shape_patch_dir`)
    is a sample too: its own metadata, its parent's ``model.py``, ``graph_net.json`` and
    ``graph_hash.txt`` (the same graph in other shapes)."""
    path = Path(path)
    if not path.is_dir():
        raise SampleError("sample folder does not exist", sample=path)
    home = model_dir(path)
    source = _read_text(home / MODEL_FILE, path, required=True)
    assert source is not None
    params = forward_parameters(source, path)
    if not (path / WEIGHT_META_FILE).is_file():
        raise SampleError(f"missing file {WEIGHT_META_FILE}", sample=path, file=WEIGHT_META_FILE)
    weight_metas = parse_meta_file(path / WEIGHT_META_FILE, path)
    input_metas = (
        parse_meta_file(path / INPUT_META_FILE, path) if (path / INPUT_META_FILE).is_file() else []
    )
    constraints = (
        parse_constraints_file(path / CONSTRAINTS_FILE, path)
        if (path / CONSTRAINTS_FILE).is_file()
        else None
    )
    graph_net: dict[str, Any] = {}
    text = _read_text(home / GRAPH_NET_FILE, path, required=False)
    if text is not None:
        try:
            graph_net = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SampleError(
                f"invalid JSON: {exc.msg}", sample=path, file=GRAPH_NET_FILE, line=exc.lineno
            ) from exc
        if not isinstance(graph_net, dict):
            raise SampleError(
                "graph_net.json must hold a JSON object", sample=path, file=GRAPH_NET_FILE
            )
    graph_hash = (_read_text(home / HASH_FILE, path, required=False) or "").strip()
    if graph_hash and not _HASH_RE.match(graph_hash):
        raise SampleError(
            f"graph hash must be 64 lowercase hex characters, got {graph_hash[:80]!r}",
            sample=path,
            file=HASH_FILE,
        )
    if not graph_hash:
        graph_hash = hashlib.sha256(source.encode()).hexdigest()
    sample = Sample(
        path,
        source,
        params,
        weight_metas,
        input_metas,
        constraints,
        graph_net,
        graph_hash,
        missing_optional_files(path),
    )
    metas = sample.metas
    for name, annotation in params:
        if name not in metas:
            raise SampleError(
                f"forward parameter {name!r} ({annotation or 'no annotation'}) has no metadata class",
                sample=path,
                file=WEIGHT_META_FILE,
                field=name,
            )
    return sample
