"""GPU workloads that put the H200 in the states `dgxperf advise` must recognise, for recordings.

python3 scripts/h200/workloads.py MODE SECONDS
MODE: idle | gemm (bf16 8192^3 loop) | memory (elementwise, memory-bound) |
      starved (a training loop whose DataLoader sleeps: input-bound) | h2d (pageable host-to-device copies)
"""

import mmap
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch


def gemm(seconds: float) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()


def memory(seconds: float) -> None:
    x = torch.randn(1 << 30, device="cuda")  # 4 GiB: every pass streams from HBM
    y = torch.empty_like(x)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            torch.add(x, 1.0, out=y)  # one read, one write, no reuse: DRAM-bound
            torch.mul(y, 0.5, out=x)
        torch.cuda.synchronize()


class Slow(torch.utils.data.Dataset):
    """A dataset whose items take 5 ms each to 'decode': the GPU waits on the input pipeline."""

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.005)
        return torch.randn(3, 64, 64), i % 10


def starved(seconds: float) -> None:
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 10)
    ).cuda()
    opt = torch.optim.AdamW(model.parameters())
    loader = torch.utils.data.DataLoader(Slow(), batch_size=64, num_workers=2)  # too few workers, no pinning
    end = time.time() + seconds
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        opt.step()
        opt.zero_grad()
        if time.time() > end:
            break


def h2d(seconds: float) -> None:
    host = torch.randn(256 << 20)  # 1 GiB of pageable memory
    dev = torch.empty_like(host, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        dev.copy_(host)
        torch.cuda.synchronize()


# -- modes added 2026-12-03 for the rules no recording has made fire yet; not yet run on the H200 ------


class SlowBatches(torch.utils.data.Dataset):
    """Items that take 23 ms each to 'decode' (sleeping, not computing): 64 of them make a 1.5 s batch."""

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.023)
        return torch.randn(64), i % 10


def starved_swing(seconds: float) -> None:
    """Guide A's symptom: two workers deliver a batch every ~0.75 s and each needs ~0.4 s of GPU work, so
    per-second utilisation swings between busy and idle (`input.util_swing`)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    loader = torch.utils.data.DataLoader(SlowBatches(), batch_size=64, num_workers=2)
    end = time.time() + seconds
    for x, _ in loader:
        x.cuda()
        for _ in range(240):  # ~0.4 s of bf16 GEMMs at ~1.7 ms each: the "training step"
            a @ b
        torch.cuda.synchronize()
        if time.time() > end:
            break


def _burn(_: int) -> float:
    total = 0.0
    for i in range(3_000_000):
        total += i * 0.5
    return total


def cpu_bound(seconds: float) -> None:
    """Preprocessing on every host core while the GPU waits (`input.cpu_bound`): a small GPU step after
    each round of pure-Python work in a process pool as wide as the machine."""
    import multiprocessing

    cores = os.cpu_count() or 1
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    model = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")  # a job's weights: it holds the GPU
    end = time.time() + seconds
    with multiprocessing.Pool(cores) as pool:
        pending = pool.map_async(_burn, range(4 * cores))
        while time.time() < end:
            pending.wait()
            pending = pool.map_async(_burn, range(4 * cores))  # the next round queued at once: no gaps
            x @ x
            torch.cuda.synchronize()
    del model


def h2d_pinned(seconds: float) -> None:
    """Pinned host-to-device copies at the link's practical ceiling (`bandwidth.pcie_rx_ceiling`)."""
    host = torch.randn(256 << 20).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()


def near_capacity(seconds: float) -> None:
    """Hold 97% of the GPU's memory while a small kernel loops (`memory.near_capacity`)."""
    free, total = torch.cuda.mem_get_info()
    keep = int(total * 0.97) - (total - free)
    hog = torch.empty(max(keep, 0), dtype=torch.uint8, device="cuda")
    x = torch.randn(2048, 2048, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        x @ x
        torch.cuda.synchronize()
        time.sleep(0.05)
    del hog


def iowait(seconds: float) -> None:
    """Eight threads reading a 4 GiB file with O_DIRECT (no page cache) while the GPU idles
    (`input.iowait`). iowait is a share of all CPU time, so one blocked reader on 16 cores shows at most
    6%: the first version of this workload read with one thread and stayed at 5.8%. The scratch file under
    $TMPDIR is written from one random 16 MiB block, synced, and removed at the end."""
    import tempfile
    import threading

    path = os.path.join(tempfile.gettempdir(), "dgxperf-iowait.bin")
    block, blocks, readers = 16 << 20, 256, 8
    chunk = os.urandom(block)
    with open(path, "wb") as handle:
        for _ in range(blocks):
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    torch.ones(1, device="cuda")
    end = time.time() + seconds

    def read(first: int) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        view = memoryview(mmap_buffer(block))
        index = first
        while time.time() < end:
            os.preadv(fd, [view], (index % blocks) * block)
            index += readers
        os.close(fd)

    try:
        threads = [threading.Thread(target=read, args=(i,)) for i in range(readers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        os.remove(path)


def mmap_buffer(size: int) -> mmap.mmap:
    return mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs


def gb_per_s(run: Callable[[], object], bytes_moved: int, repeats: int = 5) -> float:
    """GB/s of ``run`` (moving ``bytes_moved`` each time) after one warm-up call, timed with CUDA events."""
    run()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    stop.record()
    torch.cuda.synchronize()
    return repeats * bytes_moved / (start.elapsed_time(stop) / 1e3) / 1e9


def run_fastest_on_few_sms(
    name: str,
    launcher: Callable[[int, int, int], Callable[[], None]],
    bytes_moved: int,
    reference: str,
    seconds: float,
) -> None:
    """Time ``launcher(programs, block, warps)`` for a few shapes with at most 57% of the SMs holding a
    program (guide B's rule wants SM activity < 60%: 76 of the H200's 132 SMs), print each rate beside
    ``reference``, then run the fastest for ``seconds``."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    best, chosen = 0.0, (sms // 2, 4096, 8)
    run = launcher(*chosen)
    for programs in (sms * 11 // 20, sms * 4 // 7):
        for block, warps in ((4096, 8), (8192, 8), (8192, 16), (16384, 16)):
            rate = gb_per_s(launcher(programs, block, warps), bytes_moved)
            print(f"{name}: {programs} programs x {block} x {warps} warps: {rate:.0f} GB/s ({reference})")
            if rate > best:
                best, run, chosen = rate, launcher(programs, block, warps), (programs, block, warps)
    print(f"{name}: running (programs, block, warps) = {chosen} at {best:.0f} GB/s")
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            run()
        torch.cuda.synchronize()


def memory_few_sms(seconds: float) -> None:
    """Guide B's memory-bound signature, SM activity < 60% with DRAM activity > 80% (`memory_bound`): a
    streaming kernel on only part of the SMs. A full-grid elementwise loop keeps every SM resident (the
    `memory` recording: SM 99%, DRAM 88%), so this one runs a persistent Triton kernel on P programs, P
    at most 57% of the SMs, with the block size that streams fastest (the calibration is printed)."""
    import triton
    import triton.language as tl

    @triton.jit
    def stream(x_ptr, y_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0)
        for start in tl.range(pid * BLOCK, n, PROGRAMS * BLOCK, num_stages=4):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0.5 + 1.0, mask=mask)

    x = torch.randn(1 << 30, device="cuda")
    y = torch.empty_like(x)

    def launcher(programs: int, block: int, warps: int) -> Callable[[], None]:
        return lambda: stream[(programs,)](x, y, x.numel(), BLOCK=block, PROGRAMS=programs, num_warps=warps)

    moved = 2 * x.numel() * 4  # read + write
    full = f"full grid {gb_per_s(lambda: torch.add(x, 1.0, out=y), moved):.0f}"
    run_fastest_on_few_sms("memory_few_sms", launcher, moved, full, seconds)


def memory_copy_engine(seconds: float) -> None:
    """Device-to-device copies of 4 GiB with ``cudaMemcpyAsync`` (torch's ``copy_`` of contiguous tensors
    of one dtype): if the driver gives them to a copy engine, DRAM is busy while no SM is, the purest
    form of guide B's memory-bound signature (`memory_bound`). The bandwidth is printed."""
    x = torch.randn(1 << 30, device="cuda")
    y = torch.empty_like(x)
    rate = gb_per_s(lambda: y.copy_(x), 2 * x.numel() * 4, repeats=10)
    print(f"memory_copy_engine: copy_ of 4 GiB: {rate:.0f} GB/s (read + write)")
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            y.copy_(x)
        torch.cuda.synchronize()


def memory_read_few_sms(seconds: float) -> None:
    """Like `memory_few_sms`, but the persistent programs only read (a sum per program): with no
    write traffic, fewer SMs may keep DRAM busier. Programs at most 57% of the SMs; the block size and
    warps that read fastest are chosen (the calibration is printed)."""
    import triton
    import triton.language as tl

    @triton.jit
    def read(x_ptr, out_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in tl.range(pid * BLOCK, n, PROGRAMS * BLOCK, num_stages=4):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0, cache_modifier=".cg")
        tl.store(out_ptr + pid, tl.sum(acc))

    x = torch.randn(1 << 31, device="cuda")
    out = torch.empty(1024, device="cuda")

    def launcher(programs: int, block: int, warps: int) -> Callable[[], None]:
        return lambda: read[(programs,)](x, out, x.numel(), BLOCK=block, PROGRAMS=programs, num_warps=warps)

    moved = x.numel() * 4
    full = f"torch.sum on the full grid {gb_per_s(lambda: out[0].copy_(x.sum()), moved):.0f}"
    run_fastest_on_few_sms("memory_read_few_sms", launcher, moved, full, seconds)


XID_CHILD = """
import torch
import triton
import triton.language as tl


@triton.jit
def write_far(p, offset):
    tl.store(p + offset + tl.arange(0, 128), tl.zeros([128], dtype=tl.float32))


x = torch.zeros(128, device="cuda")
write_far[(1,)](x, 1 << 40)  # 4 TiB past a 512-byte buffer: no page is mapped there
torch.cuda.synchronize()
"""


def xid_app_fault(seconds: float) -> None:
    """An application XID on purpose, for `health.hardware`'s XID path on real NVML events: a child
    process writes 4 TiB past its buffer, the driver kills that process's context (an MMU fault: Xid 31,
    or 13/43), and NVML's event set reports it. Nothing in the hardware or its settings is touched; the
    GPU keeps serving other processes. The rule must call it an application XID, not a hardware fault.
    The kernel log's Xid lines are printed where the container may read them."""
    time.sleep(3)
    # Triton's @jit reads its kernel's source file, so the child must run from a file, not `python -c`
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "xid_child.py"
        script.write_text(XID_CHILD)
        child = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    last = (child.stderr.strip().splitlines() or ["(no stderr)"])[-1]
    print(f"xid_app_fault: child exit {child.returncode}: {last}")
    torch.ones(1, device="cuda").sum().item()  # this process's context is unaffected
    print("xid_app_fault: this process still computes")
    log = subprocess.run(["dmesg"], capture_output=True, text=True)
    xids = [line for line in log.stdout.splitlines() if "Xid" in line][-5:]
    print("xid_app_fault: kernel log:", xids or f"no Xid line readable (dmesg exit {log.returncode})")
    time.sleep(max(0.0, seconds - 3))


def idle(seconds: float) -> None:
    torch.ones(1, device="cuda")
    time.sleep(seconds)


if __name__ == "__main__":
    mode, duration = sys.argv[1], float(sys.argv[2])
    modes = {"gemm": gemm, "memory": memory, "starved": starved, "h2d": h2d, "idle": idle,
             "starved_swing": starved_swing, "cpu_bound": cpu_bound, "h2d_pinned": h2d_pinned,
             "near_capacity": near_capacity, "iowait": iowait,
             "memory_few_sms": memory_few_sms, "memory_copy_engine": memory_copy_engine,
             "memory_read_few_sms": memory_read_few_sms, "xid_app_fault": xid_app_fault}  # fmt: skip
    modes[mode](duration)
