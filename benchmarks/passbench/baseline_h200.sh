#!/bin/bash
# One step of a PassBench-GN baseline on one GPU host: `passnet bench eval SPLIT --compiler
# COMPILER` (default timing, --graphs-per-child 32 --overlap 4) for at most STEP_S seconds,
# resuming from the records committed in benchmarks/passbench/results/baselines_h200/NAME/
# (a device call lasts at most 10 minutes: a baseline takes several steps). NAME is
# SPLIT-COMPILER, or SPLIT-COMPILER-sample with TASKS=K (`--tasks K`: the split's sample of
# K tasks; a larger K later grows the same folder). Its records come back in
# $OUT/NAME/results.jsonl and tasks.json: copy both over the committed ones, and the next
# step resumes after them.
#
#   SPLIT=eval-classical COMPILER=inductor TASKS=20 STEP_S=540 OUT=out bash benchmarks/passbench/baseline_h200.sh
#
# COMPILER is any registered compiler (eager, inductor, inductor-scg, cudagraphs, ...).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
: "${SPLIT:?eval-fusible or eval-classical}" "${COMPILER:?a compiler name}" "${OUT:?a folder}"
NAME=$SPLIT-$COMPILER${TASKS:+-sample}
KEPT=benchmarks/passbench/results/baselines_h200/$NAME
RUN=${WORK:-/tmp/baselines}/$NAME
mkdir -p "$RUN" "$OUT/$NAME"
for f in results.jsonl tasks.json; do [ -f "$KEPT/$f" ] && cp "$KEPT/$f" "$RUN/$f"; done
echo "$NAME: $( [ -f "$KEPT/results.jsonl" ] && wc -l < "$KEPT/results.jsonl" || echo 0) records kept"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
timeout -s INT -k 30 "${STEP_S:-540}" python3 -m passnet.cli bench eval "$SPLIT" --compiler "$COMPILER" \
    ${TASKS:+--tasks "$TASKS"} --device cuda --graphs-per-child 32 --overlap 4 --out "$RUN" --quiet \
    > "$OUT/$NAME/step.log" 2>&1
echo "exit $?: $(grep -v '^ *$' "$OUT/$NAME/step.log" | tail -1 | cut -c1-160)"
cp "$RUN/results.jsonl" "$RUN/tasks.json" "$OUT/$NAME/"
echo "$NAME: $(wc -l < "$OUT/$NAME/results.jsonl") records now"
python3 -m passnet.cli bench table "$COMPILER=$RUN" --markdown 2>&1 | head -3
