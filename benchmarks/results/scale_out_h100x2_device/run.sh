#!/bin/bash
# issue 24: 2 GPUs with device-scope turns (each GPU times on its own, the other's evaluations go on), same 24 graphs and 230 s window as c3;
# then A/A (eager vs eager, 29 shipped graphs) with device-scope turns on both GPUs
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
W=/tmp/so16; rm -rf $W; mkdir -p $W $OUT; L=$PWD/bench-graphs/corpus24.txt; S=benchmarks/scale_out.py
nvidia-smi --query-gpu=name --format=csv,noheader | head -2; nproc
timeout -k 15 230 python3 $S --phase turns2 --graphs $L --work $W --overlap 4 --jobs 2 --overlap-scope device > $OUT/turns2.log 2>&1
pkill -9 -f passnet.cli; sleep 2; rm -rf /tmp/passnet-turns-*
cp $W/turns2/run/results.jsonl $OUT/turns2.jsonl; cp $W/turns2/phase.json $OUT/turns2.phase.json; echo "turns2 device: $(grep -c status $OUT/turns2.jsonl)"
timeout -k 15 200 python3 $S --phase aa-turns --work $W --overlap 4 --jobs 2 --overlap-scope device > $OUT/aa.log 2>&1
pkill -9 -f passnet.cli
cp $W/aa-turns/run/results.jsonl $OUT/aa-turns.jsonl; cp $W/aa-turns/phase.json $OUT/aa-turns.phase.json; echo "aa-turns device: $(grep -c status $OUT/aa-turns.jsonl)"
python3 $S --phase report --records $OUT 2>&1 | tail -20
