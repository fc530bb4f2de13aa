"""How a torchrun worker process of dgxperf ends (``dgxperf.train.worker``, ``dgxperf.bench.nccl_worker``)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def exit_worker(status: int) -> NoReturn:
    """Flush and leave without interpreter finalization.

    The worker has closed its files and destroyed its process group by now, but the process group's C++
    threads can still be torn down in the wrong order while Python shuts down; the process then aborts
    ("terminate called without an active exception", SIGABRT) after a successful run. It hit a few
    percent of our 2-process gloo runs (pytorch/pytorch#190489 is the same abort).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
