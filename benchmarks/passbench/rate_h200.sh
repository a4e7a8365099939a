#!/bin/bash
# One H200 host: GraphNet's harness (sequential, one process per graph) and passnet's bench eval
# (inductor, --overlap 4, default timing) on PassBench-GN's eval-fusible split, each for a fixed time.
# GRAPHNET: a checkout of PaddlePaddle/GraphNet (default .gn); OUT: where results go.
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 COLUMNS=160
B=$(python3 -m passnet.cli bench path) || exit 1
echo "bench: $B"; nproc; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gnset
find "$B/eval-fusible" -name graph_net.json -printf '%h\n' | sort | head -${GN_N:-60} | while read d; do
  cp -r "$d" /tmp/gnset/$(echo "${d#$B/}" | tr / _); done
ls /tmp/gnset | wc -l
t0=$(date +%s)
(cd ${GRAPHNET:-.gn} && PYTHONPATH=. timeout -s INT ${GN_S:-140} python3 -m graph_net_bench.torch.test_compiler --model-path /tmp/gnset \
  --compiler inductor --device cuda --warmup 25 --trials 100 > /tmp/gn.log 2>&1)
echo "graphnet wall=$(( $(date +%s) - t0 ))s finished=$(grep -c '\[Speedup\]\[e2e\]' /tmp/gn.log) started=$(grep -c 'model_path:' /tmp/gn.log)"
grep -v "Trial " /tmp/gn.log | xz -c > $OUT/graphnet.log.xz
t1=$(date +%s)
timeout -s INT -k 20 ${PN_S:-380} python3 -m passnet.cli bench eval eval-fusible --compiler inductor --device cuda \
  --graphs-per-child 32 --overlap 4 --out $OUT/inductor --quiet > /tmp/pn.log 2>&1
echo "passnet rc=$? wall=$(( $(date +%s) - t1 ))s"; tail -2 /tmp/pn.log
rm -f $OUT/inductor/results.sqlite $OUT/inductor/.passnet.lock $OUT/inductor/report.html
python3 - <<PY
import json, collections, datetime as dt
recs=[json.loads(l) for l in open('$OUT/inductor/results.jsonl')]
ts=lambda s: dt.datetime.fromisoformat(s).timestamp()
span=max(ts(r['finished_at']) for r in recs)-min(ts(r['started_at']) for r in recs)
print('records', len(recs), collections.Counter(r.get('status') for r in recs), 'span %.0fs -> %.1f graphs/min' % (span, 60*len(recs)/span))
PY
ls -la $OUT $OUT/inductor
