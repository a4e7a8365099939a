#!/bin/bash
# Two H200s of one host (32 cores): PassBench-GN's eval-fusible with inductor on one GPU, on
# both GPUs with host turns and with device turns, then A/A (eager against eager) on both
# GPUs; every phase for a fixed time, each with empty Inductor and Triton caches.
#
#   one-gpu:  GPU 0 on cores 0-15 (a one-GPU host's share), resuming the eval-fusible baseline
#             in $W/fusible; beside it GPU 1 on cores 16-31 runs the eval-classical baseline
#             ($W/classical), so that both halves of the host are as busy as in a two-GPU run
#   host:     both GPUs, all cores, --jobs 2 --overlap 4 (host turns), the same baseline folder
#   device:   the same with --overlap-scope device
#   aa:       eager against eager, --jobs 2 --overlap 4 --overlap-scope AA_SCOPE (default device)
#
# Each phase's window goes to $OUT/phases.json; records go to $OUT/<run>/results.jsonl.
# RESUME_FUSIBLE / RESUME_CLASSICAL: results.jsonl files to resume from (the committed baselines).
# Then: python3 benchmarks/passbench/two_gpus_report.py $OUT
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
W=${W:-/tmp/w2}; rm -rf "$W"; mkdir -p "$W/fusible" "$W/classical" "$W/aa" "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; nproc
python3 -m passnet.cli bench path >/dev/null || exit 1
[ -n "${RESUME_FUSIBLE:-}" ] && cp "$RESUME_FUSIBLE" "$W/fusible/results.jsonl"
[ -n "${RESUME_CLASSICAL:-}" ] && cp "$RESUME_CLASSICAL" "$W/classical/results.jsonl"
echo '{}' > "$OUT/phases.json"

stamp() {  # stamp PHASE KEY: the time now, in phases.json
    python3 - "$OUT/phases.json" "$1" "$2" <<'PY'
import json, sys, time
path, phase, key = sys.argv[1:]
d = json.load(open(path)); d.setdefault(phase, {})[key] = time.time()
json.dump(d, open(path, "w"), indent=1)
PY
}

ev() {  # ev SECONDS NAME CACHE CORES -- bench eval arguments
    local s=$1 name=$2 cache=$3 cores=$4; shift 5
    TORCHINDUCTOR_CACHE_DIR=$W/cache-$cache/inductor TRITON_CACHE_DIR=$W/cache-$cache/triton \
        timeout -s INT -k 30 "$s" taskset -c "$cores" python3 -m passnet.cli bench eval "$@" --quiet \
        > "$W/$name.log" 2>&1
    echo "$name: exit $? $(grep -v '^ *$' "$W/$name.log" | tail -1 | cut -c1-150)"
}

IND="--compiler inductor --device cuda --graphs-per-child 32 --overlap 4"
stamp one-gpu began
CUDA_VISIBLE_DEVICES=0 ev "${P1_S:-180}" one-gpu-fusible p1a 0-15 -- eval-fusible $IND --out "$W/fusible" &
CUDA_VISIBLE_DEVICES=1 ev "${P1_S:-180}" one-gpu-classical p1b 16-31 -- eval-classical $IND --out "$W/classical" &
wait; stamp one-gpu ended

stamp host began
ev "${P2_S:-140}" host p2 0-31 -- eval-fusible $IND --jobs 2 --out "$W/fusible"
stamp host ended

stamp device began
ev "${P3_S:-140}" device p3 0-31 -- eval-fusible $IND --jobs 2 --overlap-scope device --out "$W/fusible"
stamp device ended

stamp aa began
ev "${AA_S:-90}" aa p4 0-31 -- eval-fusible --compiler eager --device cuda --graphs-per-child 32 \
    --overlap 4 --jobs 2 --overlap-scope "${AA_SCOPE:-device}" --out "$W/aa"
stamp aa ended

for run in fusible classical aa; do
    mkdir -p "$OUT/$run"; cp "$W/$run/results.jsonl" "$OUT/$run/" 2>/dev/null
done
python3 benchmarks/passbench/two_gpus_report.py "$OUT"
