"""A small benchmark folder in the ``bench build`` layout (manifest schema version 2), written
by hand: task folders that ``load_task`` reads, and a manifest with every file's sha256."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from passnet.task import ENTRY_SCRIPT

SPLIT_TASKS = {
    "eval-fusible": ["add_relu-0a1b2c3d4e", "linear_gelu-1b2c3d4e5f"],
    "eval-classical": ["conv_bn_relu-2c3d4e5f60"],
    "train-fusible": ["mul_sigmoid-3d4e5f6071", "softmax_dropout-4e5f607182"],
    "train-classical": ["layer_norm_linear-5f60718293"],
    "single-op": ["relu-60718293a4"],
}
VERSION = "0.1.0"


def _graph_files(task: str, index: int) -> dict[str, str]:
    return {
        "model.py": f"# {task} graph {index}\nclass GraphModule:\n    pass\n",
        "graph_hash.txt": hashlib.sha256(f"{task}:{index}".encode()).hexdigest(),
        "graph_net.json": json.dumps({"framework": "torch", "num_devices_required": 1}) + "\n",
        "input_meta.py": "",
        "weight_meta.py": f"# {index}\n",
    }


def _write_task(task_dir: Path, split: str, name: str, graphs: int) -> list[dict[str, Any]]:
    records = []
    for i in range(graphs):
        dtype = "float32" if i % 2 == 0 else "float16"
        rel = f"graphs/{dtype}/0x{i}/g{i}_{name[-4:]}"
        for fname, text in _graph_files(name, i).items():
            (task_dir / rel).mkdir(parents=True, exist_ok=True)
            (task_dir / rel / fname).write_text(text)
        records.append(
            {
                "path": rel,
                "graph_hash": (task_dir / rel / "graph_hash.txt").read_text(),
                "dtype": dtype,
                "shape_bucket": [[0, i]],
                "source": f"timm/resnet18/fusible/{i}-{i + 3}",
                "parent": "timm/resnet18",
                "range": [i, i + 3],
            }
        )
    (task_dir / "graph_list.txt").write_text("".join(f"{r['path']}\n" for r in records))
    (task_dir / "pass_dir").mkdir()
    (task_dir / "pass_dir" / "sorted_output_pass_rule_names.json").write_text("[]\n")
    (task_dir / "entry.sh").write_text(ENTRY_SCRIPT)
    (task_dir / "entry.sh").chmod(0o755)
    task_json = {
        "schema_version": 2,
        "name": name,
        "metadata": {"builder": "bench", "split": split},
        "graphs": records,
    }
    (task_dir / "task.json").write_text(json.dumps(task_json, indent=2, sort_keys=True) + "\n")
    return records


def write_manifest(root: Path, manifest: dict[str, Any]) -> Path:
    path = root / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path


def make_bench(root: Path, *, version: str = VERSION, graphs: int = 2) -> dict[str, Any]:
    """Write a benchmark of every split under ``root``; return its manifest (also written)."""
    tasks, splits, files = [], {}, {}
    for split, names in SPLIT_TASKS.items():
        size = 0
        for name in names:
            records = _write_task(root / split / name, split, name, graphs)
            tasks.append(
                {
                    "name": name,
                    "split": split,
                    "kind": split.split("-", 1)[-1],
                    "op_sequence": name.split("-")[0].split("_"),
                    "family": "timm",
                    "selection": {},
                    "graphs": records,
                }
            )
        for f in sorted((root / split).rglob("*")):
            if f.is_file():
                files[f.relative_to(root).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
                size += f.stat().st_size
        splits[split] = {
            "tasks": len(names),
            "graphs": graphs * len(names),
            "bytes": size,
        }
    manifest = {
        "schema_version": 2,
        "name": "passbench-gn",
        "version": version,
        "build": {"seed": 0},
        "splits": splits,
        "tasks": tasks,
        "selection_summary": {},
        "files": files,
    }
    write_manifest(root, manifest)
    return manifest
