#!/bin/bash
# where does an overlapped run stall? 5 graphs, overlap 5, GPU0; states every 45 s
export PYTHONPATH=$PWD/src
W=/tmp/so12; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/corpus5.txt
CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 250 python3 benchmarks/scale_out.py --phase turns1 --graphs $L --work $W --overlap 5 > $W/t1.txt 2>&1 &
for t in 45 90 135 180 225; do sleep 45; {
  echo "=== $t"
  for f in /tmp/passnet-turns-*; do for d in members timing paused; do echo " $d: $(ls $f/$d | tr '\n' ' ')"; done; done
  ps -eo pid,stat,etime,pcpu,args | grep -E "forkserver|ptxas" | grep -v grep | cut -c1-60
  for f in /tmp/passnet-turns-*/members/*; do p=$(basename $f); echo "--- $p"; timeout 10 py-spy dump --nonblocking --pid $p 2>&1 | grep -E "^    " | grep -E "passnet/|triton/compiler|_timing|subprocess|filelock|lock" | head -4; done
} >> $OUT/dumps.txt 2>&1; done
wait; cp $W/turns1/run/results.jsonl $OUT/turns1.jsonl 2>/dev/null
grep -c status $OUT/turns1.jsonl; cat $OUT/dumps.txt | cut -c1-150 | tail -80
