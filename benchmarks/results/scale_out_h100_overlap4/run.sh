#!/bin/bash
# issue 24 after the thread bound: seq (GPU1, cores 16-31) beside turns1 --overlap 4 (GPU0, cores 0-15) on corpus12;
# then A/A eager vs eager with --overlap 4 on both GPUs (29 shipped graphs)
export PYTHONPATH=$PWD/src
W=/tmp/so14; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/corpus12.txt
S=benchmarks/scale_out.py
nvidia-smi --query-gpu=name --format=csv,noheader | head -2; nproc
CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 320 python3 $S --phase turns1 --graphs $L --work $W --overlap 4 > $W/t1.txt 2>&1 &
CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 timeout 320 python3 $S --phase seq --graphs $L --work $W > $W/seq.txt 2>&1 &
for t in 60 120 180 240 300; do sleep 60; {
  echo "=== $t s, turns1 records: $(grep -c status $W/turns1/run/results.jsonl 2>/dev/null), seq: $(grep -c status $W/seq/run/results.jsonl 2>/dev/null)"
  for f in /tmp/passnet-turns-*; do for d in timing paused members; do echo -n " $d: "; for p in $(ls $f/$d 2>/dev/null); do echo -n "$p($(ps -o etime=,pcpu= -p $p | tr -s ' '))"; done; echo; done; done
} >> $OUT/states.txt 2>&1; done
wait
timeout 250 python3 $S --phase aa-turns --work $W --overlap 4 --jobs 2 > $W/aa.txt 2>&1
for p in seq turns1 aa-turns; do cp $W/$p/run/results.jsonl $OUT/$p.jsonl 2>/dev/null; cp $W/$p/phase.json $OUT/$p.phase.json 2>/dev/null; done
cat $OUT/states.txt | cut -c1-200
python3 $S --phase report --records $OUT 2>&1 | tail -30
