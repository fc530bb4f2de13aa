"""exit_worker leaves with the given status and loses none of what was printed (stdout is a pipe here, so
it is block-buffered: without the flush, os._exit would drop it)."""

from __future__ import annotations

import subprocess
import sys


def test_exit_worker_keeps_buffered_output_and_status() -> None:
    code = (
        "import sys; from dgxperf.worker_exit import exit_worker; "
        "print('result line', end=''); print('last words', file=sys.stderr, end=''); "
        "import atexit; atexit.register(lambda: print('finalized'));"
        "exit_worker(3)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "result line"  # flushed, and no finalization (the atexit hook never ran)
    assert done.stderr == "last words"
