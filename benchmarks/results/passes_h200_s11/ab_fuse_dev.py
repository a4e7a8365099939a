# development script: in-process A/B of the fp32 fuse limit, run at commit e87d3f7
"""One-off: add_layer_norm on bge fp32, fp32 fuse limit 262144 (new) vs 65536 (old), in-process."""
import shutil
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, "benchmarks/passes")
from rule_set_ab import measure_graph  # noqa: E402

from passnet.passes.library import build_reference_task  # noqa: E402

work = Path(tempfile.mkdtemp())
task = build_reference_task("add_layer_norm", work / "t", dtypes=(torch.float32,))
old = work / "old"
shutil.copytree(task.pass_dir, old)
f = old / "FusedLinearAddLayerNorm.py"
src = f.read_text()
assert "{torch.float32: 262144," in src
f.write_text(src.replace("{torch.float32: 262144,", "{torch.float32: 65536,"))
for path in task.graphs:
    if "bge" not in path.name:
        continue
    row = measure_graph(path, {"new": task.pass_dir, "old": old}, 15, 200)
    print(path.name, {k: round(v, 4) for k, v in row["median_ms"].items()},
          {k: round(v, 3) for k, v in row["speedup"].items()})
