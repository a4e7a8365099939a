#!/bin/bash
# issue 26: inductor and cudagraphs on the corpus scg set (same warm H100 as c1)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
W=/tmp/c2; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/scgset.txt
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for c in inductor cudagraphs; do
  timeout -k 20 265 python3 -m passnet.cli eval $L --device cuda --compiler $c --warmup 10 --trials 50 --prepare-workers 12 --out $W/$c --quiet > $W/$c.log 2>&1
  pkill -9 -f passnet.cli; cp $W/$c/results.jsonl $OUT/$c.jsonl 2>/dev/null; echo "$c: $(grep -c status $OUT/$c.jsonl 2>/dev/null)"; tail -3 $W/$c.log
done
