"""Collective benchmark in the manner of NVIDIA's nccl-tests, driven from PyTorch (NCCL on GPUs, gloo on CPU).

What it measures
    Seven operations: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``reduce`` (both with
    root 0), ``all_to_all`` and ``sendrecv`` (a ring: rank r sends to r+1 and receives from r-1, as
    ``sendrecv_perf``). For each message size of the ``-b/-e/-f`` sweep (begin, end, factor) and each
    placement (out-of-place, in-place) it reports the time of one operation, the algorithm bandwidth and the
    bus bandwidth, and counts the wrong elements of one checked run, like nccl-tests' ``#wrong`` column.

Sizes and counts follow nccl-tests (``src/*.cu``, ``*GetCollByteCount``)
    ``count = size // element_size``. all_reduce, broadcast, reduce and sendrecv move ``count`` elements.
    all_gather, reduce_scatter and all_to_all use a per-rank chunk ``base = (count // nranks)`` rounded down
    to a multiple of 16 bytes (nccl-tests' ``& -(16/eltSize)``); the size reported is then
    ``base * nranks * element_size``: the gathered output of all_gather, the input of reduce_scatter, the
    send buffer of all_to_all. Small sizes can therefore round to 0 bytes, exactly as nccl-tests prints them.

Bandwidths follow nccl-tests (``*GetBw`` and ``doc/PERFORMANCE.md``)
    ``algbw = size / time`` (decimal GB/s) and ``busbw = algbw * factor`` with ``2(n-1)/n`` for all_reduce,
    ``(n-1)/n`` for all_gather, reduce_scatter and all_to_all, and 1 for broadcast, reduce and sendrecv.
    ``Avg bus bandwidth`` per operation is the mean busbw over every size and both placements, as
    ``common.cu`` accumulates it (``bw += busBw; bw_count++`` once per size and placement).

Timing
    Per size and placement: ``warmup`` untimed operations, then ``batches`` batches of ``iters`` back-to-back
    operations, each batch timed by :func:`dgxperf.bench.base.time_gpu` (CUDA events with NCCL, the host
    clock with gloo) after a barrier that lines the ranks up. The per-operation time of a batch is the
    batch time / ``iters``; rank 0 gathers every rank's per-batch times and keeps, per batch, the slowest
    rank's. The figure is the median over batches, with the spread (:class:`~dgxperf.bench.base.Timing`).

Correctness
    Inputs are derived from rank and index (never zeros; integers small enough that every sum, product,
    min or max over the ranks is exact in float16/bfloat16/int8). After timing, the buffers are filled
    again, the operation runs once, and each rank counts the elements that differ from the expectation it
    computes locally; rank 0 sums the counts. In-place all_to_all and sendrecv are timed but not checked
    (nccl-tests prints ``N/A``: the send buffer is the receive buffer), which is ``wrong = None`` here.

Where PyTorch differs from nccl-tests
    ``torch.distributed`` has only in-place all_reduce and reduce (``ncclAllReduce(sendbuff, recvbuff)`` with
    two buffers cannot be reached from PyTorch), so those two are measured in-place only. Its broadcast
    takes one buffer per rank, so out-of-place broadcast sends from the root's send buffer and receives into
    the others' receive buffers; NCCL's extra copy into the root's own receive buffer does not happen.

Running it
    On one node, ``dgxperf bench nccl --gpus 8`` (:func:`launch`) starts ``torchrun`` itself. Across nodes,
    start the worker on every node yourself::

        torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
            -m dgxperf.bench.nccl_worker --config '{"ops": ["all_reduce"], "begin": 8, "end": 8589934592}' \\
            --out result.json

    or with Slurm, one task per node, each running torchrun (the c10d rendezvous numbers the ranks, so
    no node needs its own arguments)::

        HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
        srun --nodes 2 --ntasks-per-node 1 --gpus-per-node 8 \\
            torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint $HEAD:29500 \\
            -m dgxperf.bench.nccl_worker --config '{"ops": ["all_reduce"]}' --out result.json

    Rank 0 writes ``result.json`` (the JSON of :meth:`NcclResult.to_json`) on the node it runs on.

    ``dgxperf bench nccl`` itself also runs as one rank when started under torchrun (``WORLD_SIZE`` set).
    The environment reaches the workers unchanged: NCCL_* settings (NCCL_NVLS_ENABLE, NCCL_ALGO, ...),
    TORCH_SYMM_MEM_DISABLE_MULTICAST and NVSHMEM_DISABLE_NVLS apply as given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dgxperf.bench.base import (
    BENCH_SCHEMA,
    BenchError,
    Measurement,
    Timing,
    human_bytes,
    size_sweep,
    time_gpu,
)

OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "sendrecv",
)
REDUCE_OPS: tuple[str, ...] = ("sum", "prod", "min", "max", "avg")
BACKENDS: tuple[str, ...] = ("nccl", "gloo")
REDUCING_OPS: frozenset[str] = frozenset({"all_reduce", "reduce_scatter", "reduce"})
ROOT = 0  # nccl-tests' default root (-r 0) for broadcast and reduce

# nccl-tests' *GetBw: busbw = algbw * factor(n). The factor is what a ring moves over each rank's busiest
# link per byte of the operation, so busbw is comparable across operations and with the link's peak.
BUSBW_FACTOR: Mapping[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}

# The ops whose chunk per rank nccl-tests rounds down to 16 bytes (`(count/nranks) & -(16/eltSize)`).
_CHUNKED_OPS = frozenset({"all_gather", "reduce_scatter", "all_to_all"})
# torch.distributed has no out-of-place form of these: the result always overwrites the input.
_INPLACE_ONLY_OPS = frozenset({"all_reduce", "reduce"})
# nccl-tests does not check these in-place (reportErrors = 0): the send buffer is the receive buffer.
_UNCHECKED_INPLACE_OPS = frozenset({"all_to_all", "sendrecv"})


@dataclasses.dataclass(frozen=True)
class _DType:
    torch_name: str
    size: int
    floating: bool
    exact_limit: int  # every integer up to this is exact in the type
    epsilon: float  # unit round-off * 2 (machine epsilon); 0 for integers


DTYPES: Mapping[str, _DType] = {
    "float32": _DType("float32", 4, True, 1 << 24, 2.0**-23),
    "float16": _DType("float16", 2, True, 1 << 11, 2.0**-10),
    "bfloat16": _DType("bfloat16", 2, True, 1 << 8, 2.0**-7),
    "float64": _DType("float64", 8, True, 1 << 53, 2.0**-52),
    "int32": _DType("int32", 4, False, (1 << 31) - 1, 0.0),
    "int8": _DType("int8", 1, False, 127, 0.0),
}
# nccl-tests' own names (-d float, half, double, int) and dgxperf's short ones.
_DTYPE_ALIASES: Mapping[str, str] = {
    "float": "float32",
    "fp32": "float32",
    "half": "float16",
    "fp16": "float16",
    "bf16": "bfloat16",
    "double": "float64",
    "fp64": "float64",
    "int": "int32",
}

_CHUNK_ELEMENTS = 1 << 22  # fill and check in slices, so an 8 GiB message needs no 8 GiB temporaries
_PATTERN_RANGE = 15  # input values are 1..15 unless a sum over the ranks would leave the exact range


def canonical_dtype(name: str) -> str:
    """``float``/``fp32``/``float32`` -> ``float32``; :class:`BenchError` for a dtype this benchmark lacks."""
    key = name.strip().lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise BenchError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}")
    return key


def busbw_factor(op: str, nranks: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``op`` on ``nranks`` ranks (0 for the (n-1)/n family at n = 1)."""
    if op not in BUSBW_FACTOR:
        raise BenchError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")
    if nranks < 1:
        raise BenchError(f"the number of ranks must be >= 1, not {nranks}")
    return BUSBW_FACTOR[op](nranks)


@dataclasses.dataclass(frozen=True)
class CollShape:
    """Element counts of one operation at one message size, as nccl-tests' ``setupArgs`` derives them.

    ``count`` is nccl-tests' ``count`` column: the count handed to the NCCL call (the per-rank chunk for
    all_gather, reduce_scatter and all_to_all). ``size_bytes`` is its ``size`` column:
    ``max(send, recv) * element_size``. The in-place offsets are per rank, in elements: in-place, rank r's
    input starts at ``send_inplace_offset * r`` and its output at ``recv_inplace_offset * r`` inside the
    receive buffer.
    """

    op: str
    requested_bytes: int
    element_size: int
    nranks: int
    count: int
    send_count: int
    recv_count: int
    send_inplace_offset: int
    recv_inplace_offset: int

    @property
    def size_bytes(self) -> int:
        return max(self.send_count, self.recv_count) * self.element_size

    @property
    def buffer_count(self) -> int:
        """Elements of each of the send and receive buffers (in-place reduce_scatter reads all of recv)."""
        return max(self.send_count, self.recv_count)


def coll_shape(op: str, size_bytes: int, element_size: int, nranks: int) -> CollShape:
    """nccl-tests' counts for ``op`` at ``size_bytes``: ``count = size // element_size``, then per rank."""
    if op not in OPS:
        raise BenchError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")
    if nranks < 1 or element_size < 1 or size_bytes < 0:
        raise BenchError(f"bad shape request: size {size_bytes} B, element {element_size} B, {nranks} ranks")
    count = size_bytes // element_size
    if op in _CHUNKED_OPS:
        align = max(1, 16 // element_size)
        base = (count // nranks) // align * align
        send, recv = {
            "all_gather": (base, base * nranks),
            "reduce_scatter": (base * nranks, base),
            "all_to_all": (base * nranks, base * nranks),
        }[op]
        send_off = base if op == "all_gather" else 0
        recv_off = base if op == "reduce_scatter" else 0
        return CollShape(op, size_bytes, element_size, nranks, base, send, recv, send_off, recv_off)
    return CollShape(op, size_bytes, element_size, nranks, count, count, count, 0, 0)


def placements(op: str) -> tuple[bool, ...]:
    """The placements measured for ``op``: (out-of-place, in-place), or in-place only where torch has no other."""
    return (True,) if op in _INPLACE_ONLY_OPS else (False, True)


def _torch_version() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def gloo_supports_avg(dtype: str, torch_version: tuple[int, int] | None = None) -> bool:
    """Whether gloo can run ReduceOp.AVG on ``dtype``.

    PyTorch added AVG to gloo in 2.8 (pytorch#149781) as a SUM followed by a division, which exists only for
    floating types; before that gloo refused AVG altogether.
    """
    version = torch_version if torch_version is not None else _torch_version()
    return version >= (2, 8) and DTYPES[canonical_dtype(dtype)].floating


def _cuda_gpus() -> int:
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


@dataclasses.dataclass
class NcclConfig:
    """What to run; the defaults are nccl-tests' (-w 5 -n 20, float, sum) with a 8 B .. 128 MiB x2 sweep."""

    ops: list[str] = dataclasses.field(default_factory=lambda: list(OPS))
    begin: int = 8
    end: int = 128 << 20
    factor: float = 2.0
    dtype: str = "float32"
    reduce_op: str = "sum"
    warmup: int = 5
    iters: int = 20
    batches: int = 5
    check: bool = True
    backend: str | None = None  # None: nccl when CUDA is available, else gloo

    def resolved_backend(self) -> str:
        if self.backend is not None:
            return self.backend
        return "nccl" if _cuda_gpus() > 0 else "gloo"

    def sizes(self) -> list[int]:
        return size_sweep(self.begin, self.end, self.factor)

    def validate(self) -> None:
        """:class:`BenchError` with the reason for anything this benchmark cannot run as asked."""
        if not self.ops:
            raise BenchError(f"no collective chosen; choose from {', '.join(OPS)}")
        unknown = [op for op in self.ops if op not in OPS]
        if unknown:
            raise BenchError(
                f"unknown collective(s) {', '.join(map(repr, unknown))}; choose from {', '.join(OPS)}"
            )
        for name in ("begin", "end"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BenchError(f"{name} must be a positive number of bytes, not {value!r}")
        self.sizes()  # inverted range, factor <= 1
        for name in ("iters", "batches"):
            if getattr(self, name) < 1:
                raise BenchError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.warmup < 0:
            raise BenchError(f"warmup must be >= 0, not {self.warmup}")
        dtype = canonical_dtype(self.dtype)
        if self.reduce_op not in REDUCE_OPS:
            raise BenchError(f"unknown reduction {self.reduce_op!r}; choose one of {', '.join(REDUCE_OPS)}")
        if self.backend is not None and self.backend not in BACKENDS:
            raise BenchError(f"unknown backend {self.backend!r}; choose nccl, gloo, or leave it unset (auto)")
        reducing = [op for op in self.ops if op in REDUCING_OPS]
        if (
            self.reduce_op == "avg"
            and reducing
            and self.resolved_backend() == "gloo"
            and not gloo_supports_avg(dtype)
        ):
            raise BenchError(
                f"reduction 'avg' is not supported by the gloo backend for {dtype} "
                f"(needed by {', '.join(reducing)}): gloo has no native average; PyTorch >= 2.8 emulates "
                "it as sum-then-divide for floating types only. Use --reduce-op sum, a floating dtype, "
                "or the nccl backend (ncclAvg)."
            )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NcclConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise BenchError(
                f"unknown nccl config key(s) {', '.join(extra)}; known: {', '.join(sorted(known))}"
            )
        values = dict(data)
        if "ops" in values:
            values["ops"] = list(values["ops"])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class RankInfo:
    rank: int
    local_rank: int
    hostname: str
    device: str  # the GPU's name, or "cpu"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class NcclResult:
    """What rank 0 reports: one Measurement per (op, size, placement) and nccl-tests' Avg bus bandwidth."""

    measurements: list[Measurement]
    avg_busbw: dict[str, float]
    ranks: int
    backend: str
    world: list[RankInfo]
    nccl_version: str | None
    config: NcclConfig
    notes: list[str] = dataclasses.field(default_factory=list)
    torch_version: str | None = None

    @property
    def wrong(self) -> int:
        """Wrong elements over every checked measurement (the sum of nccl-tests' #wrong column)."""
        return sum(int(m.extra.get("wrong") or 0) for m in self.measurements)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": BENCH_SCHEMA,
            "suite": "nccl",
            "backend": self.backend,
            "ranks": self.ranks,
            "nccl_version": self.nccl_version,
            "torch_version": self.torch_version,
            "world": [r.to_json() for r in self.world],
            "config": self.config.to_json(),
            "avg_busbw": dict(self.avg_busbw),
            "wrong": self.wrong,
            "notes": list(self.notes),
            "measurements": [m.to_json() for m in self.measurements],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NcclResult:
        if data.get("schema") != BENCH_SCHEMA or data.get("suite") != "nccl":
            raise BenchError(
                f"not an nccl bench result: schema {data.get('schema')!r}, suite {data.get('suite')!r}"
            )
        return cls(
            measurements=[_measurement_from_json(m) for m in data["measurements"]],
            avg_busbw={str(k): float(v) for k, v in data["avg_busbw"].items()},
            ranks=int(data["ranks"]),
            backend=str(data["backend"]),
            world=[RankInfo(**r) for r in data["world"]],
            nccl_version=data.get("nccl_version"),
            config=NcclConfig.from_json(data["config"]),
            notes=list(data.get("notes", [])),
            torch_version=data.get("torch_version"),
        )


def _measurement_from_json(data: Mapping[str, Any]) -> Measurement:
    timing_fields = {f.name for f in dataclasses.fields(Timing)}
    extra = dict(data.get("extra", {}))
    # Measurement.to_json rounds ``value`` to 4 decimals, which flattens small-message figures on slow
    # links to 0; the unrounded busbw travels in ``extra``.
    value = float(extra.get("busbw_gbs", data["value"]))
    return Measurement(
        bench=str(data["bench"]),
        name=str(data["name"]),
        params=dict(data["params"]),
        value=value,
        unit=str(data["unit"]),
        timing=Timing(**{k: v for k, v in data["timing"].items() if k in timing_fields}),
        peak=data.get("peak"),
        extra=extra,
    )


# -- data patterns and the #wrong check ------------------------------------------------------------------------


def _value_range(dtype: str, nranks: int, reduce_op: str | None) -> int:
    """How many distinct input values (1..m) keep a sum over ``nranks`` ranks exact in ``dtype``."""
    if reduce_op in ("sum", "avg"):
        return max(1, min(_PATTERN_RANGE, DTYPES[dtype].exact_limit // nranks))
    return _PATTERN_RANGE


def pattern(ranks: Any, index: Any, *, nranks: int, dtype: str, reduce_op: str | None) -> Any:
    """Rank ``ranks``' input value at element ``index`` (int64 tensors, broadcast together), as int64.

    Values are 1..m from a hash of (rank, index), so no element is zero and a chunk delivered to the wrong
    place differs from the expected one in most elements. For ``prod`` a value is +-1 except +-2 on the
    one rank with ``index % nranks == rank``: the product over ranks is +-2 for every element, exact in
    every dtype, with a sign that varies by element.
    """
    mixed = index * 40503 + (ranks + 1) * 9973
    mixed = mixed ^ (mixed >> 11)
    if reduce_op == "prod":
        sign = 1 - 2 * (mixed & 1)
        return sign * (1 + ((index % nranks) == ranks).long())
    return 1 + mixed % _value_range(dtype, nranks, reduce_op)


def _reduce_over_ranks(index: Any, *, nranks: int, dtype: str, reduce_op: str) -> Any:
    """The exact reduction over ranks 0..n-1 of :func:`pattern` at ``index``, as float64."""
    import torch

    acc = pattern(torch.zeros_like(index), index, nranks=nranks, dtype=dtype, reduce_op=reduce_op)
    for rank in range(1, nranks):
        value = pattern(torch.full_like(index, rank), index, nranks=nranks, dtype=dtype, reduce_op=reduce_op)
        if reduce_op in ("sum", "avg"):
            acc = acc + value
        elif reduce_op == "prod":
            acc = acc * value
        elif reduce_op == "min":
            acc = torch.minimum(acc, value)
        else:
            acc = torch.maximum(acc, value)
    if reduce_op == "avg":
        # NCCL's integer average divides the sum (ncclAvg on ints: sum, then integer division).
        return (acc // nranks).double() if not DTYPES[dtype].floating else acc.double() / nranks
    return acc.double()


def expected_values(
    op: str,
    positions: Any,
    *,
    rank: int,
    nranks: int,
    chunk: int,
    dtype: str,
    reduce_op: str,
    root: int = ROOT,
) -> Any:
    """What rank ``rank``'s output holds at ``positions`` (int64 tensor) after ``op``, as float64.

    ``chunk`` is the per-rank count of the chunked ops (:attr:`CollShape.count`). Every rank fills its input
    with :func:`pattern`; this is the local twin of nccl-tests' ``InitDataReduce``/``InitData`` for the
    expected buffer.
    """
    import torch

    def of(ranks: Any, index: Any) -> Any:
        return pattern(ranks, index, nranks=nranks, dtype=dtype, reduce_op=None).double()

    def full(value: int) -> Any:
        return torch.full_like(positions, value)

    if op in ("all_reduce", "reduce"):
        return _reduce_over_ranks(positions, nranks=nranks, dtype=dtype, reduce_op=reduce_op)
    if op == "reduce_scatter":
        return _reduce_over_ranks(rank * chunk + positions, nranks=nranks, dtype=dtype, reduce_op=reduce_op)
    if op == "broadcast":
        return of(full(root), positions)
    if op == "sendrecv":
        return of(full((rank - 1) % nranks), positions)
    if op == "all_gather":
        return of(positions // chunk, positions % chunk)
    if op == "all_to_all":
        return of(positions // chunk, rank * chunk + positions % chunk)
    raise BenchError(f"unknown collective {op!r}")


def tolerance(dtype: str, reduce_op: str | None, nranks: int) -> float:
    """Relative tolerance of the check: 0 (exact) except a floating average, which rounds.

    NCCL averages floats by pre-multiplying each input by 1/n before the sum; each of the n+1 roundings adds
    at most half an epsilon of the result.
    """
    if reduce_op == "avg" and DTYPES[dtype].floating:
        return (nranks + 1) * DTYPES[dtype].epsilon
    return 0.0


def count_wrong(got: Any, expected: Any, rel_tol: float = 0.0) -> int:
    """Elements of ``got`` that differ from ``expected`` by more than ``rel_tol * |expected|`` (NaN is wrong)."""
    if tuple(got.shape) != tuple(expected.shape):
        raise ValueError(f"shape mismatch: got {tuple(got.shape)}, expected {tuple(expected.shape)}")
    want = expected.double()
    diff = (got.double() - want).abs()
    ok = diff <= rel_tol * want.abs()
    return int((~ok).sum().item())


# -- one rank's work -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Record:
    op: str
    shape: CollShape
    inplace: bool
    per_batch_s: list[float]
    wrong: int | None


class _Collective:
    """One operation at one size: its buffers (allocated once), how to fill, run and check them."""

    def __init__(
        self, op: str, shape: CollShape, *, rank: int, dtype: str, reduce_op: str, device: Any
    ) -> None:
        import torch
        import torch.distributed as dist

        self.op, self.shape, self.rank, self.dtype_name = op, shape, rank, dtype
        self.reduce_op = reduce_op
        self.pattern_op = reduce_op if op in REDUCING_OPS else None
        self.device = device
        self.dtype = getattr(torch, DTYPES[dtype].torch_name)
        self.send = torch.empty(shape.buffer_count, dtype=self.dtype, device=device)
        self.recv = torch.empty(shape.buffer_count, dtype=self.dtype, device=device)
        self.red = {
            "sum": dist.ReduceOp.SUM,
            "prod": dist.ReduceOp.PRODUCT,
            "min": dist.ReduceOp.MIN,
            "max": dist.ReduceOp.MAX,
            "avg": dist.ReduceOp.AVG,
        }[reduce_op]

    def views(self, inplace: bool) -> tuple[Any, Any]:
        """(input, output) as nccl-tests' startColl places them (recvbuff + offset * rank in-place)."""
        s = self.shape
        if not inplace:
            return self.send[: s.send_count], self.recv[: s.recv_count]
        first_in = s.send_inplace_offset * self.rank
        first_out = s.recv_inplace_offset * self.rank
        return self.recv[first_in : first_in + s.send_count], self.recv[first_out : first_out + s.recv_count]

    def prepare(self, inplace: bool) -> None:
        """Inputs from :func:`pattern`; outputs zeroed first so a collective that writes nothing is caught."""
        import torch

        source, _ = self.views(inplace)
        self.recv.zero_()
        if self.op == "broadcast" and self.rank != ROOT:
            return  # only the root's data matters; the others' stays zero until it arrives
        for start in range(0, source.numel(), _CHUNK_ELEMENTS):
            end = min(start + _CHUNK_ELEMENTS, source.numel())
            index = torch.arange(start, end, dtype=torch.int64, device=self.device)
            values = pattern(
                torch.full_like(index, self.rank),
                index,
                nranks=self.shape.nranks,
                dtype=self.dtype_name,
                reduce_op=self.pattern_op,
            )
            source[start:end].copy_(values.to(self.dtype))

    def runner(self, inplace: bool) -> Callable[[int], object]:
        import torch.distributed as dist

        source, target = self.views(inplace)
        n, rank, red = self.shape.nranks, self.rank, self.red
        # Recent torch renamed the tensor forms (*_single) and deprecates the old names; older ones lack the new.
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

        if self.op == "all_reduce":
            return lambda _: dist.all_reduce(target, op=red)
        if self.op == "reduce":
            return lambda _: dist.reduce(target, ROOT, op=red)
        if self.op == "broadcast":
            buffer = source if rank == ROOT else target
            return lambda _: dist.broadcast(buffer, ROOT)
        if self.op == "all_gather":
            return lambda _: gather(target, source)
        if self.op == "reduce_scatter":
            return lambda _: scatter(target, source, op=red)
        if self.op == "all_to_all":
            return lambda _: dist.all_to_all_single(target, source)

        def sendrecv(_: int) -> None:
            works = dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.isend, source, (rank + 1) % n),
                    dist.P2POp(dist.irecv, target, (rank - 1) % n),
                ]
            )
            for work in works:
                work.wait()

        return sendrecv

    def check(self, inplace: bool) -> int | None:
        """This rank's #wrong after one run, or None where nccl-tests prints N/A."""
        import torch

        if inplace and self.op in _UNCHECKED_INPLACE_OPS:
            return None
        self.prepare(inplace)
        self.runner(inplace)(0)
        if self.op == "reduce" and self.rank != ROOT:
            return 0  # only the root holds a result
        if self.op == "broadcast" and self.rank == ROOT and not inplace:
            return 0  # torch's broadcast leaves the root's receive buffer alone
        _, target = self.views(inplace)
        n = self.shape.nranks
        rel = tolerance(self.dtype_name, self.reduce_op if self.op in REDUCING_OPS else None, n)
        wrong = 0
        for start in range(0, target.numel(), _CHUNK_ELEMENTS):
            end = min(start + _CHUNK_ELEMENTS, target.numel())
            positions = torch.arange(start, end, dtype=torch.int64, device=self.device)
            want = expected_values(
                self.op,
                positions,
                rank=self.rank,
                nranks=n,
                chunk=self.shape.count,
                dtype=self.dtype_name,
                reduce_op=self.reduce_op,
            )
            wrong += count_wrong(target[start:end], want, rel)
        return wrong


def _time_batches(
    run: Callable[[int], object],
    *,
    warmup: int,
    batches: int,
    iters: int,
    cuda: bool,
    barrier: Callable[[], None],
) -> list[float]:
    """Per-operation seconds of each batch on this rank; every batch starts right after a barrier.

    One :func:`time_gpu` call per batch, because rank 0 needs every rank's per-batch times (a Timing keeps
    only their quantiles) and the barrier has to sit between batches.
    """
    import torch

    for i in range(warmup):
        run(i)
    if cuda:
        torch.cuda.synchronize()
    per_batch = []
    for _ in range(batches):
        # Without this, a rank that reaches the batch early would time its wait for the late ones.
        barrier()
        per_batch.append(time_gpu(run, warmup=0, batches=1, inner=iters, cuda=cuda).median_s)
    return per_batch


def _unsupported(op: str, backend: str, nranks: int) -> str | None:
    if op == "sendrecv" and nranks == 1 and backend == "gloo":
        return "sendrecv skipped: with one rank it sends to itself, which gloo cannot (NCCL can)"
    return None


def _run_local(
    config: NcclConfig, *, rank: int, nranks: int, backend: str, device: Any
) -> tuple[list[_Record], list[str]]:
    import torch.distributed as dist

    dtype = canonical_dtype(config.dtype)
    element_size = DTYPES[dtype].size
    cuda = backend == "nccl"
    records: list[_Record] = []
    notes: list[str] = []
    for op in dict.fromkeys(config.ops):
        reason = _unsupported(op, backend, nranks)
        if reason:
            notes.append(reason)
            continue
        for size in config.sizes():
            shape = coll_shape(op, size, element_size, nranks)
            coll = _Collective(op, shape, rank=rank, dtype=dtype, reduce_op=config.reduce_op, device=device)
            for inplace in placements(op):
                coll.prepare(inplace)
                per_batch = _time_batches(
                    coll.runner(inplace),
                    warmup=config.warmup,
                    batches=config.batches,
                    iters=config.iters,
                    cuda=cuda,
                    barrier=dist.barrier,
                )
                wrong = coll.check(inplace) if config.check else None
                records.append(_Record(op, shape, inplace, per_batch, wrong))
            del coll
    return records, notes


# -- the whole world --------------------------------------------------------------------------------------------


def _nccl_version() -> str | None:
    import torch

    try:
        version = torch.cuda.nccl.version()
    except Exception:  # a CPU-only build has no NCCL to ask
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version[:3])
    code = int(version)
    # NCCL_VERSION_CODE: 2.8.4 -> 2804 before 2.9, 2.19.3 -> 21903 from 2.9 on
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _nvlink_peak(
    world: Sequence[RankInfo], backend: str, local_device: int
) -> tuple[float | None, str | None]:
    """Per-direction NVLink GB/s of the GPU when every rank shares one NVLink domain (one host)."""
    import torch

    from dgxperf.hw.specs import match_spec

    if backend != "nccl" or len(world) < 2:
        return None, None
    hosts = sorted({r.hostname for r in world})
    if len(hosts) > 1:
        return None, (
            f"no peak given: the ranks span {len(hosts)} hosts, so the network between them, not NVLink, "
            "bounds busbw"
        )
    props = torch.cuda.get_device_properties(local_device)
    spec = match_spec(props.name, int(props.total_memory))
    if spec is None or not spec.nvlink_bandwidth_gbs:
        return None, f"no peak given: {props.name} has no NVLink figure in the datasheet table"
    return spec.nvlink_bandwidth_gbs / 2, None


def _combine(
    config: NcclConfig,
    gathered: Sequence[tuple[RankInfo, list[_Record]]],
    *,
    backend: str,
    peak: float | None,
) -> tuple[list[Measurement], dict[str, float]]:
    """Rank 0: per batch the slowest rank's time, #wrong summed over ranks, then nccl-tests' figures."""
    nranks = len(gathered)
    mine = gathered[0][1]
    if any(len(records) != len(mine) for _, records in gathered):
        raise BenchError("the ranks measured different numbers of cases; were they given the same config?")
    dtype = canonical_dtype(config.dtype)
    measurements: list[Measurement] = []
    sums: dict[str, list[float]] = {}
    for i, record in enumerate(mine):
        per_batch = [max(records[i].per_batch_s[b] for _, records in gathered) for b in range(config.batches)]
        timing = Timing.of(per_batch, config.iters)
        wrongs = [records[i].wrong for _, records in gathered]
        wrong = None if any(w is None for w in wrongs) else sum(w for w in wrongs if w is not None)
        shape = record.shape
        seconds = timing.median_s
        algbw = shape.size_bytes / seconds / 1e9 if seconds > 0 else 0.0
        busbw = algbw * busbw_factor(record.op, nranks)
        sums.setdefault(record.op, []).append(busbw)
        measurements.append(
            Measurement(
                bench="nccl",
                name=f"{record.op} {human_bytes(shape.size_bytes)} {'in-place' if record.inplace else 'out-of-place'}",
                params={
                    "op": record.op,
                    "size_bytes": shape.size_bytes,
                    "requested_bytes": shape.requested_bytes,
                    "count": shape.count,
                    "dtype": dtype,
                    "reduce_op": config.reduce_op if record.op in REDUCING_OPS else None,
                    "inplace": record.inplace,
                    "ranks": nranks,
                    "backend": backend,
                },
                value=busbw,
                unit="GB/s",
                timing=timing,
                peak=peak,
                extra={"time_us": seconds * 1e6, "algbw_gbs": algbw, "busbw_gbs": busbw, "wrong": wrong},
            )
        )
    avg = {op: sum(values) / len(values) for op, values in sums.items()}
    return measurements, avg


def _general_notes(config: NcclConfig, nranks: int) -> list[str]:
    ops = list(dict.fromkeys(config.ops))
    notes = []
    inplace_only = [op for op in ops if op in _INPLACE_ONLY_OPS]
    if inplace_only:
        notes.append(
            f"{' and '.join(inplace_only)}: in-place only; torch.distributed has no out-of-place form "
            "(nccl-tests' out-of-place column has no PyTorch equivalent)"
        )
    unchecked = [op for op in ops if op in _UNCHECKED_INPLACE_OPS]
    if unchecked and config.check:
        notes.append(
            f"{' and '.join(unchecked)} in-place: timed but not checked (#wrong N/A, as in nccl-tests: "
            "the send buffer is the receive buffer)"
        )
    if nranks == 1:
        notes.append(
            "single rank: nothing crosses a link, so busbw is 0 for all_reduce, all_gather, reduce_scatter "
            "and all_to_all by nccl-tests' formulas (factor 2(n-1)/n or (n-1)/n = 0 at n = 1). algbw of the "
            "out-of-place all_gather, reduce_scatter, all_to_all and sendrecv is the local copy speed (bytes "
            "written); in-place, and broadcast/reduce, one rank moves nothing, so their time is the call "
            "overhead alone. Use --gpus N or torchrun for real figures."
        )
    return notes


def run_collectives(config: NcclConfig, env: Mapping[str, str] | None = None) -> NcclResult | None:
    """Run the benchmark as one rank; rank 0 returns the result, the other ranks None.

    Uses the process group already initialised, else initialises one from torchrun's environment (RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT through ``env://``), else (no WORLD_SIZE) a one-process
    group of its own. ``env`` holds those variables (``os.environ`` when None). With NCCL, the CUDA device is
    LOCAL_RANK. A group this function created is destroyed before it returns.
    """
    import torch
    import torch.distributed as dist

    config.validate()
    env = os.environ if env is None else env
    local_rank = int(env.get("LOCAL_RANK", "0"))
    created = False
    if dist.is_initialized():
        name = str(dist.get_backend())
        backend = "nccl" if "nccl" in name else "gloo" if "gloo" in name else name
        if backend not in BACKENDS:
            raise BenchError(f"the process group's backend {name!r} is neither nccl nor gloo")
        if config.backend is not None and config.backend != backend:
            raise BenchError(f"asked for backend {config.backend}, but the process group uses {name}")
    else:
        backend = config.resolved_backend()
    if backend == "nccl":
        gpus = _cuda_gpus()
        if gpus == 0:
            raise BenchError(
                "backend nccl needs a CUDA GPU, and this machine has none that PyTorch can use "
                "(torch.cuda.is_available() is False); use backend gloo to run on CPU"
            )
        if local_rank >= gpus:
            raise BenchError(f"LOCAL_RANK {local_rank} has no GPU: this node has {gpus}")
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if not dist.is_initialized():
        device_id = device if backend == "nccl" else None
        if "WORLD_SIZE" in env:
            dist.init_process_group(
                backend,
                init_method="env://",
                rank=int(env["RANK"]),
                world_size=int(env["WORLD_SIZE"]),
                device_id=device_id,
            )
        else:
            # One process needs no rendezvous: an in-memory store replaces host, port and peers.
            dist.init_process_group(
                backend, store=dist.HashStore(), rank=0, world_size=1, device_id=device_id
            )
        created = True
    try:
        rank, nranks = dist.get_rank(), dist.get_world_size()
        me = RankInfo(
            rank=rank,
            local_rank=local_rank,
            hostname=socket.gethostname(),
            device=torch.cuda.get_device_name(local_rank) if backend == "nccl" else "cpu",
        )
        records, notes = _run_local(config, rank=rank, nranks=nranks, backend=backend, device=device)
        gathered: list[Any] = [None] * nranks if rank == 0 else []
        dist.gather_object((me, records), gathered if rank == 0 else None, dst=0)
        if rank != 0:
            return None
        world = [info for info, _ in gathered]
        peak, peak_note = _nvlink_peak(world, backend, local_rank)
        measurements, avg = _combine(config, gathered, backend=backend, peak=peak)
        all_notes = _general_notes(config, nranks) + notes + ([peak_note] if peak_note else [])
        return NcclResult(
            measurements=measurements,
            avg_busbw=avg,
            ranks=nranks,
            backend=backend,
            world=world,
            nccl_version=_nccl_version() if backend == "nccl" else None,
            config=dataclasses.replace(config, backend=backend),
            notes=all_notes,
            torch_version=str(torch.__version__),
        )
    finally:
        if created:
            dist.destroy_process_group()


# -- launching torchrun -----------------------------------------------------------------------------------------


def _tail(text: str, lines: int = 40, chars: int = 4000) -> str:
    kept = "\n".join(text.strip().splitlines()[-lines:])
    return kept[-chars:]


def _stop(process: subprocess.Popen[str]) -> None:
    """End torchrun, which ends its workers itself.

    torchrun starts each worker in a session of its own, so the signal to torchrun's group reaches torchrun
    alone; on SIGTERM it terminates its workers (SIGTERM, then SIGKILL after its own grace period) before it
    exits. SIGKILL comes only when it has not exited well after that grace period.
    """
    for sig, wait_s in ((signal.SIGTERM, 45.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def launch(config: NcclConfig, nproc: int, env: Mapping[str, str], timeout_s: float) -> NcclResult:
    """Run ``nproc`` ranks on this node under torchrun and return rank 0's result.

    ``env`` is the workers' whole environment, passed on unchanged (NCCL_*, TORCH_SYMM_MEM_*, NVSHMEM_*
    and every other variable). A worker that fails, times out or writes no result raises
    :class:`BenchError` with the end of its output.
    """
    config.validate()
    if nproc < 1:
        raise BenchError(f"the number of processes must be >= 1, not {nproc}")
    backend = config.resolved_backend()
    if backend == "nccl":
        gpus = _cuda_gpus()
        if nproc > gpus:
            why = (
                " (no CUDA GPU is visible to PyTorch here: torch.cuda.is_available() is False); "
                "use backend gloo to run the benchmark on CPU"
                if gpus == 0
                else ""
            )
            raise BenchError(f"asked for {nproc} GPUs with backend nccl, this node has {gpus}{why}")
    # The workers must not decide "auto" again on their own: they would agree, but say what was decided.
    fixed = dataclasses.replace(config, backend=backend)
    with tempfile.TemporaryDirectory(prefix="dgxperf-nccl-") as folder:
        out = Path(folder) / "result.json"
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(nproc),
            "-m",
            "dgxperf.bench.nccl_worker",
            "--config",
            json.dumps(fixed.to_json()),
            "--out",
            str(out),
        ]
        process = subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # one process group to stop on timeout: torchrun and its workers
        )
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(process)
            output, _ = process.communicate()
            raise BenchError(
                f"the nccl benchmark ({nproc} ranks) did not finish within {timeout_s:.0f} s and was stopped; "
                f"last output:\n{_tail(output or '')}"
            ) from None
        if process.returncode != 0:
            raise BenchError(
                f"the nccl benchmark workers failed (torchrun exit status {process.returncode}); "
                f"last output:\n{_tail(output or '')}"
            )
        if not out.exists():
            raise BenchError(
                f"the nccl benchmark workers wrote no result; last output:\n{_tail(output or '')}"
            )
        return NcclResult.from_json(json.loads(out.read_text()))
