#!/bin/bash
# 4 GPUs, 16 cores each: inductor, cudagraphs, inductor-scg on the 29 shipped graphs (GPUs 0-2);
# GPU 3: gpu tests, pass_evaluator latency shared vs fresh children, passes with cudagraphs off/auto
export PYTHONPATH=$PWD/src
W=$PWD/.gpu/w6; mkdir -p $W $OUT; D=$PWD/src/passnet/data/graphnet
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nproc
run() { taskset -c $1 bash -c "CUDA_VISIBLE_DEVICES=$2 timeout 480 python -m passnet.cli eval $D --device cuda --compiler $3 --warmup 10 --trials 50 --prepare-workers 10 --out $W/$3 --quiet > $W/$3.log 2>&1; cp $W/$3/results.jsonl $OUT/$3.jsonl" & }
run 0-15 0 inductor; run 16-31 1 cudagraphs; run 32-47 2 inductor-scg
taskset -c 48-63 bash -c "export CUDA_VISIBLE_DEVICES=3
timeout 150 python -m pytest -m gpu tests/compilers/test_cudagraph.py tests/evaluate/test_shared_child.py -q -p no:cacheprovider > $OUT/gputests.txt 2>&1
timeout 130 python benchmarks/agent_latency.py --device cuda --work $W/lat --calls 3 --policy-tasks > $OUT/latency.txt 2>&1
timeout 100 python benchmarks/agent_latency.py --device cuda --work $W/lat --calls 2 --graphs-per-child 1 --policy-tasks >> $OUT/latency.txt 2>&1
for p in roll_add_layer_norm rms_norm; do python -m passnet.cli library task \$p $W/t_\$p --dtypes float32 > /dev/null 2>&1; for cg in off auto; do timeout 60 python -m passnet.cli eval $W/t_\$p --device cuda --compiler pass_mgr --config cudagraphs=\$cg --warmup 10 --trials 50 --out $W/p_\${p}_\$cg --quiet >> $W/p.log 2>&1; cat $W/p_\${p}_\$cg/results.jsonl >> $OUT/passes.jsonl; done; done" &
wait; tail -1 $OUT/gputests.txt; grep -v "^\s*$" $OUT/latency.txt | grep -v -i warn; wc -l $W/*/results.jsonl | tail -1
