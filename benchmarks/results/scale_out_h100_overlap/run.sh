#!/bin/bash
# 12 corpus graphs to completion: seq (GPU1, cores 16-31) beside turns1 (GPU0, cores 0-15, overlap 6); then turns2 (both GPUs, 32 cores)
export PYTHONPATH=$PWD/src
W=/tmp/so11; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/corpus12.txt
S=benchmarks/scale_out.py
CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 330 python3 $S --phase turns1 --graphs $L --work $W --overlap 6 > $W/t1.txt 2>&1 &
CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 timeout 330 python3 $S --phase seq --graphs $L --work $W > $W/seq.txt 2>&1 &
wait
timeout 200 python3 $S --phase turns2 --graphs $L --work $W --overlap 6 --jobs 2 > $W/t2.txt 2>&1
cat $W/t1.txt $W/seq.txt $W/t2.txt | grep -E "^(seq|turns)"
for p in seq turns1 turns2; do cp $W/$p/run/results.jsonl $OUT/$p.jsonl 2>/dev/null; cp $W/$p/wall.json $OUT/$p.wall.json 2>/dev/null; done
python3 $S --phase report --records $OUT
