"""GPU workloads that put the H200 in the states `dgxperf advise` must recognise, for recordings.

    python3 scripts/h200/workloads.py MODE SECONDS
    MODE: idle | gemm (bf16 8192^3 loop) | memory (elementwise, memory-bound) |
          starved (a training loop whose DataLoader sleeps: input-bound) | h2d (pageable host-to-device copies)
"""

import sys
import time

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
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 10)).cuda()
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


def idle(seconds: float) -> None:
    torch.ones(1, device="cuda")
    time.sleep(seconds)


if __name__ == "__main__":
    mode, duration = sys.argv[1], float(sys.argv[2])
    {"gemm": gemm, "memory": memory, "starved": starved, "h2d": h2d, "idle": idle}[mode](duration)
