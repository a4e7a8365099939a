#!/bin/bash
# issue 26: GPU tests (cudagraph selection incl. PerShape, partitions; roofline TF32), then inductor-scg on the corpus scg set
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
W=/tmp/c1; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/scgset.txt
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nproc
timeout -k 10 150 python3 -m pytest -m gpu tests/compilers/test_cudagraph.py tests/evaluate/test_roofline.py -q -p no:cacheprovider > $OUT/gputests.txt 2>&1; tail -5 $OUT/gputests.txt
for c in inductor-scg; do
  timeout -k 20 400 python3 -m passnet.cli eval $L --device cuda --compiler $c --warmup 10 --trials 50 --prepare-workers 12 --out $W/$c --quiet > $W/$c.log 2>&1
  pkill -9 -f passnet.cli; cp $W/$c/results.jsonl $OUT/$c.jsonl 2>/dev/null; echo "$c: $(grep -c status $OUT/$c.jsonl 2>/dev/null)"; tail -3 $W/$c.log
done
python3 benchmarks/scg_compare.py $OUT 2>&1 | tail -20
