#!/bin/bash
# issue 26: partitioned programs cached apart: the GPU partition test, then xclip (partitioned) with inductor-scg and a prepare worker
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p $OUT; nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout -k 10 90 python3 -m pytest -m gpu tests/compilers/test_cudagraph.py -k "partitions or cached_apart" -q -p no:cacheprovider 2>&1 | tail -2
timeout -k 10 200 python3 -m passnet.cli eval bench-graphs/xclip.txt --device cuda --compiler inductor-scg --warmup 10 --trials 50 --prepare-workers 4 --out /tmp/x --quiet > /tmp/x.log 2>&1; tail -2 /tmp/x.log
cp /tmp/x/results.jsonl $OUT/xclip-scg.jsonl
python3 -c "
import json
r=json.loads(open('$OUT/xclip-scg.jsonl').readline()); print(r['status'], r['compile_cache'], {k: round(v,1) for k,v in r['phases_s'].items() if k in ('compile','load','measure','total')}, r['speedup_e2e'])
for d in r['cudagraphs']: print(d['name'], d['chosen'], d['reason'])"
