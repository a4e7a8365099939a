#!/bin/bash
# issue 26: gpu tests (partitions), then inductor / cudagraphs / inductor-scg on the corpus set
export PYTHONPATH=$PWD/src
W=/tmp/c13; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/scgset.txt
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nproc
python3 -c "import torch, torch._inductor.utils as u; print(torch.__version__, hasattr(u,'set_customized_partition_wrappers'))"
timeout 100 python3 -m pytest -m gpu tests/compilers/test_cudagraph.py -q -p no:cacheprovider -x > $OUT/gputests.txt 2>&1; tail -3 $OUT/gputests.txt
for c in inductor cudagraphs inductor-scg; do
  timeout 150 python3 -m passnet.cli eval $L --device cuda --compiler $c --warmup 10 --trials 50 --prepare-workers 12 --out $W/$c --quiet > $W/$c.log 2>&1
  cp $W/$c/results.jsonl $OUT/$c.jsonl 2>/dev/null; echo "$c: $(grep -c status $OUT/$c.jsonl 2>/dev/null)"; tail -2 $W/$c.log
done
python3 benchmarks/scg_compare.py $OUT 2>&1 | tail -20
