#!/bin/bash
# issue 24: 1 GPU (GPU 0, cores 0-15, a 1-GPU host's share) against 2 GPUs (both, 32 cores), --overlap 4, same 24 corpus graphs, same 230 s window
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
W=/tmp/so15; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/corpus24.txt; S=benchmarks/scale_out.py
nvidia-smi --query-gpu=name --format=csv,noheader | head -2; nproc
CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout -k 15 230 python3 $S --phase turns1 --graphs $L --work $W --overlap 4 > $OUT/turns1.log 2>&1
pkill -9 -f passnet.cli; pkill -9 -f passnet-prepare; sleep 2; rm -rf /tmp/passnet-turns-*
cp $W/turns1/run/results.jsonl $OUT/turns1.jsonl; cp $W/turns1/phase.json $OUT/turns1.phase.json; echo "turns1: $(grep -c status $OUT/turns1.jsonl)"
timeout -k 15 230 python3 $S --phase turns2 --graphs $L --work $W --overlap 4 --jobs 2 > $OUT/turns2.log 2>&1
pkill -9 -f passnet.cli; sleep 1
cp $W/turns2/run/results.jsonl $OUT/turns2.jsonl; cp $W/turns2/phase.json $OUT/turns2.phase.json; echo "turns2: $(grep -c status $OUT/turns2.jsonl)"
python3 $S --phase report --records $OUT 2>&1 | tail -20
