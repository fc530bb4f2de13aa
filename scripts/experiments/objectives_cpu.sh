#!/usr/bin/env bash
# Masked LM against ELECTRA at CPU scale (preset tiny: 2 layers x 64, its generator 2 x 16), 20 epochs each
# over the full training texts, compared by the linear probe every pretraining records. Run as
#   bash scripts/experiments/objectives_cpu.sh [OUT]      (about 12 + 27 minutes on this 2-core machine)
#
# Result, 2026-12-05 (torch 2.14.1 CPU, batch 64, lr 1e-3, seed 0), probe dev accuracy after epochs 5 / 10 / 15 / 20:
#   mlm      68.4 / 69.8 / 71.1 / 71.0%   masked-LM loss 7.37 -> 5.53, dev 6.27 -> 5.50
#   electra  68.2 / 65.4 / 65.7 / 65.4%   generator loss 8.00 -> 5.93; discriminator 0.378 -> 0.339 (epoch 2)
#                                          -> 0.41 (epoch 3) -> 0.392; dev 0.258 -> 0.390
# At this size ELECTRA loses. While the generator is near uniform (epoch 1) its samples are rare characters,
# easy to spot; once it has learnt the characters' frequencies (loss ~6, by epoch 3) the 64-wide
# discriminator can no longer tell them from the text, and its loss stays near the 0.42 nats of answering
# "original" everywhere. ELECTRA's own smallest model is 12 x 256; preset large (24 x 1024) has not run
# (docs/benchmarks/PENDING.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-/tmp/objectives-cpu}"
for objective in mlm electra; do
  PYTHONPATH=src .venv/bin/python -m dgxperf pretrain --device cpu --preset tiny --set compile=false --epochs 20 \
    --batch-size 64 --lr 1e-3 --objective "$objective" --checkpoint-every 0 --out "$out/$objective" --json \
    > "$out-$objective.json"
done
