#!/bin/bash
# One step of a PassBench-GN baseline on one GPU host: `passnet bench eval SPLIT --compiler
# COMPILER` (default timing, --graphs-per-child 32 --overlap 4) for at most STEP_S seconds,
# resuming from the records committed in benchmarks/passbench/results/baselines_h200/
# SPLIT-COMPILER/ (a device call lasts at most 10 minutes: a baseline takes several steps).
# Its records come back in $OUT/SPLIT-COMPILER/results.jsonl: copy that file over the
# committed one, and the next step resumes after it.
#
#   SPLIT=eval-classical COMPILER=inductor STEP_S=540 OUT=out bash benchmarks/passbench/baseline_h200.sh
#
# COMPILER is any registered compiler (eager, inductor, inductor-scg, cudagraphs, ...).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
: "${SPLIT:?eval-fusible or eval-classical}" "${COMPILER:?a compiler name}" "${OUT:?a folder}"
NAME=$SPLIT-$COMPILER
KEPT=benchmarks/passbench/results/baselines_h200/$NAME/results.jsonl
RUN=${WORK:-/tmp/baselines}/$NAME
mkdir -p "$RUN" "$OUT/$NAME"
[ -f "$KEPT" ] && cp "$KEPT" "$RUN/results.jsonl"
echo "$NAME: $( [ -f "$KEPT" ] && wc -l < "$KEPT" || echo 0) records kept"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
timeout -s INT -k 30 "${STEP_S:-540}" python3 -m passnet.cli bench eval "$SPLIT" --compiler "$COMPILER" \
    --device cuda --graphs-per-child 32 --overlap 4 --out "$RUN" --quiet > "$OUT/$NAME/step.log" 2>&1
echo "exit $?: $(grep -v '^ *$' "$OUT/$NAME/step.log" | tail -1 | cut -c1-160)"
cp "$RUN/results.jsonl" "$OUT/$NAME/results.jsonl"
echo "$NAME: $(wc -l < "$OUT/$NAME/results.jsonl") records now"
python3 -m passnet.cli bench table "$COMPILER=$RUN" --markdown 2>&1 | head -3
