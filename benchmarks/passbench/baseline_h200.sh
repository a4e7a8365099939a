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
# COMPILER is any registered compiler (eager, inductor, inductor-scg, cudagraphs, ...), or
# `library`: the library policy's row, `passnet agent run SPLIT --policy library` (one
# episode per task, the records of each task's submitted pass directory; docs/bench.md,
# "The library baseline"). Its step also brings back trajectories.jsonl (a task is done
# when its trajectory and its records are there: commit the three files), and it must run
# at the same folder ($WORK/NAME, default /tmp/baselines/NAME) and with the same
# PASSNET_CACHE_DIR at every step: the run's configuration names the episodes' pass_dir
# paths there. At the step's end the episode under way gets KILL_S seconds (default 90
# here, STEP_S 480) to finish and keep its records; one cut short runs again next step.
#
#   SPLIT=eval-fusible COMPILER=library TASKS=20 OUT=out bash benchmarks/passbench/baseline_h200.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
: "${SPLIT:?eval-fusible or eval-classical}" "${COMPILER:?a compiler name, or library}" "${OUT:?a folder}"
NAME=$SPLIT-$COMPILER${TASKS:+-sample}
KEPT=benchmarks/passbench/results/baselines_h200/$NAME
RUN=${WORK:-/tmp/baselines}/$NAME
FILES="results.jsonl tasks.json"
STEP=${STEP_S:-540} KILL=${KILL_S:-30}
if [ "$COMPILER" = library ]; then
    FILES="$FILES trajectories.jsonl" STEP=${STEP_S:-480} KILL=${KILL_S:-90}
    COMMAND=(agent run "$SPLIT" --policy library)
else
    COMMAND=(bench eval "$SPLIT" --compiler "$COMPILER" --graphs-per-child 32 --overlap 4 --quiet)
fi
mkdir -p "$RUN" "$OUT/$NAME"
for f in $FILES; do [ -f "$KEPT/$f" ] && cp "$KEPT/$f" "$RUN/$f"; done
echo "$NAME: $( [ -f "$KEPT/results.jsonl" ] && wc -l < "$KEPT/results.jsonl" || echo 0) records kept"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
timeout -s INT -k "$KILL" "$STEP" python3 -m passnet.cli "${COMMAND[@]}" \
    ${TASKS:+--tasks "$TASKS"} --device cuda --out "$RUN" > "$OUT/$NAME/step.log" 2>&1
echo "exit $?: $(grep -v '^ *$' "$OUT/$NAME/step.log" | tail -1 | cut -c1-160)"
for f in $FILES; do [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/$NAME/"; done
echo "$NAME: $(wc -l < "$OUT/$NAME/results.jsonl") records now"
python3 -m passnet.cli bench table "$COMPILER=$RUN" --markdown 2>&1 | head -3
