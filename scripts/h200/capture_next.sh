#!/usr/bin/env bash
# The next device call, whichever card comes (docs/benchmarks/PENDING.md's rule; calls naming nvidia-h200
# were given an H100 four sessions running on 2026-12-05). On an H200 the table (PENDING item 1: one 80-epoch
# masked-LM encoder, the three recipes with seed 1, then optimized and guide with more seeds, then optimized
# seeds 1-3 with pooling=mean if time is left); on any other card the pooling and label-smoothing pairs
# (item 2: from one 128-token encoder, optimized with [CLS] pooling against the mean over real tokens, seeds
# 1-6, and against label_smoothing=0.1, seeds 1-4; each pair shares encoder and seed, and the list is ordered
# so that a session cut short still leaves whole pairs).
# The same command every call, carrying .data:
#   OUT=$OUT bash scripts/h200/capture_next.sh
# Each item keeps what earlier calls on the still-warm machine finished (KEEP_DONE) and resumes a cut
# pretraining from its checkpoint, so the command is repeated until its log says every run is finished.
# Results as capture_table.sh's and capture_seeds.sh's: log-table.txt, pretrain.json, log-seeds.txt,
# monitor-seeds.{jsonl,log} and seeds.tgz.
set -uo pipefail
OUT="${OUT:?set OUT}"
here="$(dirname "${BASH_SOURCE[0]}")"
card="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
if [[ "$card" == *H200* ]]; then
  echo "== ${card}: the table (PENDING item 1)"
  # 540 s: 80 epochs took 442 s with start-up on the H200 (2026-12-04), before the held-out passes were added;
  # a pretraining cut after epoch 79 would resume from epoch 60. Seed 1 of optimized may then wait a call.
  OUT=$OUT VALIDATE=no BUDGET_S=540 bash "$here/capture_table.sh"
  OUT=$OUT KEEP_DONE=yes RUN_LIMIT_S=300 \
    RUNS="optimized:1 guide:1 baseline:1 optimized:2 guide:2 optimized:3 optimized:1:pooling=mean optimized:2:pooling=mean optimized:3:pooling=mean" \
    END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash "$here/capture_seeds.sh"
else
  echo "== ${card:-no GPU named}: the pooling and label-smoothing pairs (PENDING item 2)"
  # 540 s: 80 epochs at 128 tokens take ~445 s on an H100 (4.15 s an epoch, the first ~56 s with the compile,
  # ~60 s outside the epochs: 2026-12-05-h100-encoder-160)
  OUT=$OUT VALIDATE=no BUDGET_S=540 bash "$here/capture_table.sh"
  OUT=$OUT KEEP_DONE=yes \
    RUNS="optimized:1 optimized:1:pooling=mean optimized:1:label_smoothing=0.1 optimized:2 optimized:2:pooling=mean optimized:2:label_smoothing=0.1 \
optimized:3 optimized:3:pooling=mean optimized:4 optimized:4:pooling=mean optimized:3:label_smoothing=0.1 optimized:4:label_smoothing=0.1 \
optimized:5 optimized:5:pooling=mean optimized:6 optimized:6:pooling=mean" \
    END_S=$((590 - SECONDS)) STOP_AFTER_S=$((500 - SECONDS)) bash "$here/capture_seeds.sh"
fi
