#!/bin/bash
# issue 25: pass_evaluator latency on the 9-graph add_layer_norm task (GPU3); library policy vs Inductor
# on every reference task (GPUs 0-3); GPU tests first on GPU0
export PYTHONPATH=$PWD/src
W=$PWD/.gpu/w4; mkdir -p $W $OUT
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nproc; python -c "import torch, triton; print(torch.__version__, triton.__version__)"
lat() { taskset -c $1 bash -c "export CUDA_VISIBLE_DEVICES=$2; $4 timeout ${5:-560} python benchmarks/agent_latency.py --device cuda --work $W/g$2 $3 > $OUT/agent_g$2.txt 2>&1" & }
lat 0-15 0 "--calls 0 --policy-tasks masked_mean_pooling" "timeout 200 python -m pytest -m gpu tests -q -p no:cacheprovider -x > $OUT/gputests.txt 2>&1;" 340
lat 16-31 1 "--calls 0 --policy-tasks rms_norm roll_add_layer_norm"
lat 32-47 2 "--calls 0 --policy-tasks linear_bias_gelu scale_mask_softmax"
lat 48-63 3 "--calls 5 --policy-tasks add_layer_norm"
wait; tail -3 $OUT/gputests.txt; for g in 0 1 2 3; do echo "== GPU $g"; grep -v "^\s*$" $OUT/agent_g$g.txt | tail -14; done
