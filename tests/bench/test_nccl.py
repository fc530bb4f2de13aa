"""dgxperf bench nccl: nccl-tests' formulas and counts, the #wrong checker, and real gloo runs on CPU."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from dgxperf.bench import nccl, nccl_worker
from dgxperf.bench.base import BENCH_SCHEMA, BenchError, size_sweep

# -- busbw factors, written out by hand from nccl-tests' *GetBw ------------------------------------------------

# all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce, sendrecv 1.
ALL_REDUCE = {2: 1.0, 3: 4 / 3, 4: 1.5, 5: 1.6, 6: 5 / 3, 7: 12 / 7, 8: 1.75}
N_MINUS_1_OVER_N = {2: 0.5, 3: 2 / 3, 4: 0.75, 5: 0.8, 6: 5 / 6, 7: 6 / 7, 8: 0.875}
EXPECTED_FACTORS = {
    "all_reduce": ALL_REDUCE,
    "all_gather": N_MINUS_1_OVER_N,
    "reduce_scatter": N_MINUS_1_OVER_N,
    "all_to_all": N_MINUS_1_OVER_N,
    "broadcast": dict.fromkeys(range(2, 9), 1.0),
    "reduce": dict.fromkeys(range(2, 9), 1.0),
    "sendrecv": dict.fromkeys(range(2, 9), 1.0),
}


@pytest.mark.parametrize("op", nccl.OPS)
@pytest.mark.parametrize("n", range(2, 9))
def test_busbw_factor_matches_hand_computed_values(op: str, n: int) -> None:
    assert nccl.busbw_factor(op, n) == pytest.approx(EXPECTED_FACTORS[op][n], rel=1e-12)


def test_busbw_factor_spot_values_and_one_rank() -> None:
    assert nccl.busbw_factor("all_reduce", 8) == 1.75
    assert nccl.busbw_factor("all_gather", 4) == 0.75
    assert nccl.busbw_factor("broadcast", 8) == 1.0
    # One rank moves nothing over a link: the (n-1) family is 0; the root-based and p2p ones stay 1.
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        assert nccl.busbw_factor(op, 1) == 0.0
    for op in ("broadcast", "reduce", "sendrecv"):
        assert nccl.busbw_factor(op, 1) == 1.0
    assert set(nccl.BUSBW_FACTOR) == set(nccl.OPS)


def test_busbw_factor_rejects_unknown_op_and_zero_ranks() -> None:
    with pytest.raises(BenchError, match="unknown collective 'allreduce'"):
        nccl.busbw_factor("allreduce", 8)
    with pytest.raises(BenchError, match=">= 1"):
        nccl.busbw_factor("all_reduce", 0)


# -- counts and sizes, as nccl-tests' *GetCollByteCount + setupArgs -------------------------------------------


@pytest.mark.parametrize(
    ("op", "size", "elsize", "n", "count", "size_bytes", "send", "recv"),
    [
        # count = size // elsize; the whole buffer for all_reduce/broadcast/reduce/sendrecv
        ("all_reduce", 10, 4, 4, 2, 8, 2, 2),
        ("broadcast", 1 << 20, 2, 8, 524288, 1 << 20, 524288, 524288),
        ("sendrecv", 7, 2, 2, 3, 6, 3, 3),
        ("reduce", 8, 8, 8, 1, 8, 1, 1),
        # chunked ops: base = (count // n) rounded down to 16 bytes; size = base * n * elsize
        ("all_gather", 8, 4, 2, 0, 0, 0, 0),  # 2 floats over 2 ranks: 1 float < 16 B -> nothing
        ("all_gather", 32, 4, 2, 4, 32, 4, 8),
        ("all_gather", 100, 4, 3, 8, 96, 8, 24),  # 25 floats / 3 = 8, a multiple of 4 floats
        ("all_gather", 24, 8, 2, 0, 0, 0, 0),  # 3 doubles / 2 = 1, rounded down to 2 doubles -> 0
        ("reduce_scatter", 1 << 20, 2, 8, 65536, 1 << 20, 524288, 65536),
        ("reduce_scatter", 1000, 4, 3, 80, 960, 240, 80),  # 250 / 3 = 83 -> 80
        ("all_to_all", 1000, 1, 3, 320, 960, 960, 960),  # 1000 / 3 = 333 -> 320 bytes per peer
        ("all_to_all", 64, 4, 8, 0, 0, 0, 0),  # 2 floats per peer < 16 B
    ],
)
def test_coll_shape_rounds_like_nccl_tests(
    op: str, size: int, elsize: int, n: int, count: int, size_bytes: int, send: int, recv: int
) -> None:
    shape = nccl.coll_shape(op, size, elsize, n)
    assert (shape.count, shape.size_bytes, shape.send_count, shape.recv_count) == (
        count,
        size_bytes,
        send,
        recv,
    )
    assert shape.requested_bytes == size


def test_coll_shape_inplace_offsets() -> None:
    # In place, rank r's all_gather input sits at recvbuff + r*base, its reduce_scatter output likewise.
    assert nccl.coll_shape("all_gather", 1024, 4, 4).send_inplace_offset == 64
    assert nccl.coll_shape("all_gather", 1024, 4, 4).recv_inplace_offset == 0
    assert nccl.coll_shape("reduce_scatter", 1024, 4, 4).recv_inplace_offset == 64
    assert nccl.coll_shape("reduce_scatter", 1024, 4, 4).buffer_count == 256
    assert nccl.coll_shape("all_reduce", 1024, 4, 4).send_inplace_offset == 0


# -- config validation ----------------------------------------------------------------------------------------


def test_default_config_is_valid_and_round_trips() -> None:
    config = nccl.NcclConfig(backend="gloo")
    config.validate()
    assert nccl.NcclConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    assert config.sizes()[0] == 8 and config.sizes()[-1] == 128 << 20


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"begin": 1 << 20, "end": 8}, "inverted"),
        ({"ops": ["all_reduce", "allgather"]}, "unknown collective.*'allgather'.*all_gather"),
        ({"ops": []}, "no collective"),
        ({"dtype": "float8"}, "unknown dtype 'float8'.*bfloat16"),
        ({"reduce_op": "mean"}, "unknown reduction 'mean'.*avg"),
        ({"factor": 1.0}, "factor must be > 1"),
        ({"iters": 0}, "iters must be >= 1"),
        ({"batches": 0}, "batches must be >= 1"),
        ({"warmup": -1}, "warmup must be >= 0"),
        ({"begin": 0}, "begin must be a positive number of bytes"),
        ({"backend": "mpi"}, "unknown backend 'mpi'"),
        ({"reduce_op": "avg", "dtype": "int32"}, "'avg' is not supported by the gloo backend for int32"),
    ],
)
def test_config_validation_errors(changes: dict[str, Any], message: str) -> None:
    config = nccl.NcclConfig(**{"backend": "gloo", **changes})
    with pytest.raises(BenchError, match=message):
        config.validate()


def test_avg_on_gloo_depends_on_torch_and_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    # gloo gained AVG in PyTorch 2.8, as sum-then-divide for floating types; NCCL has ncclAvg for all.
    assert nccl.gloo_supports_avg("float32", (2, 8))
    assert not nccl.gloo_supports_avg("float32", (2, 7))
    assert not nccl.gloo_supports_avg("int8", (2, 14))
    monkeypatch.setattr(nccl, "_torch_version", lambda: (2, 7))
    with pytest.raises(BenchError, match=r"gloo has no native average.*nccl backend"):
        nccl.NcclConfig(backend="gloo", reduce_op="avg").validate()
    # avg only matters to the reducing ops, and NCCL always has it
    nccl.NcclConfig(backend="gloo", reduce_op="avg", ops=["all_gather", "broadcast"]).validate()
    nccl.NcclConfig(backend="nccl", reduce_op="avg", dtype="int8").validate()


def test_dtype_aliases() -> None:
    assert nccl.canonical_dtype("float") == "float32"
    assert nccl.canonical_dtype("half") == "float16"
    assert nccl.canonical_dtype("bf16") == "bfloat16"
    assert nccl.canonical_dtype("torch.float64") == "float64"
    with pytest.raises(BenchError, match="unknown dtype"):
        nccl.canonical_dtype("uint64")


def test_unknown_config_keys_are_refused() -> None:
    with pytest.raises(BenchError, match="unknown nccl config key"):
        nccl.NcclConfig.from_json({"opz": ["all_reduce"]})


# -- the data pattern and the #wrong checker ------------------------------------------------------------------


def _inputs(rank: int, n: int, length: int, dtype: str, reduce_op: str | None) -> torch.Tensor:
    """Rank ``rank``'s input as the benchmark fills it, in the benchmark's dtype."""
    index = torch.arange(length, dtype=torch.int64)
    values = nccl.pattern(torch.full_like(index, rank), index, nranks=n, dtype=dtype, reduce_op=reduce_op)
    return values.to(getattr(torch, nccl.DTYPES[dtype].torch_name))


def _reduce_in_dtype(tensors: list[torch.Tensor], reduce_op: str) -> torch.Tensor:
    """What a backend computes: the reduction accumulated in the low-precision dtype itself."""
    acc = tensors[0].clone()
    for t in tensors[1:]:
        if reduce_op in ("sum", "avg"):
            acc = acc + t
        elif reduce_op == "prod":
            acc = acc * t
        elif reduce_op == "min":
            acc = torch.minimum(acc, t)
        else:
            acc = torch.maximum(acc, t)
    return acc


def _expected(
    op: str, rank: int, n: int, length: int, chunk: int, dtype: str, reduce_op: str
) -> torch.Tensor:
    positions = torch.arange(length, dtype=torch.int64)
    return nccl.expected_values(
        op, positions, rank=rank, nranks=n, chunk=chunk, dtype=dtype, reduce_op=reduce_op
    )


@pytest.mark.parametrize("dtype", list(nccl.DTYPES))
@pytest.mark.parametrize("reduce_op", ["sum", "prod", "min", "max"])
def test_reductions_are_exact_in_every_dtype_over_8_ranks(dtype: str, reduce_op: str) -> None:
    n, length = 8, 4096
    inputs = [_inputs(r, n, length, dtype, reduce_op) for r in range(n)]
    assert all(bool((t != 0).all()) for t in inputs), "inputs must never be zero"
    got = _reduce_in_dtype(inputs, reduce_op)
    want = _expected("all_reduce", 0, n, length, 0, dtype, reduce_op)
    assert nccl.count_wrong(got, want) == 0
    if reduce_op == "prod":
        assert set(got.double().abs().unique().tolist()) == {2.0}
        assert len(got.double().unique()) == 2  # both signs occur


def test_avg_check_allows_rounding_but_not_errors() -> None:
    n, length = 3, 1024
    inputs = [_inputs(r, n, length, "bfloat16", "avg") for r in range(n)]
    # NCCL's float average: each input times 1/n, then the sum (every step rounded to bfloat16)
    got = _reduce_in_dtype([t * (1.0 / n) for t in inputs], "sum")
    want = _expected("all_reduce", 0, n, length, 0, "bfloat16", "avg")
    rel = nccl.tolerance("bfloat16", "avg", n)
    assert nccl.count_wrong(got, want, rel) == 0
    assert nccl.count_wrong(got * 1.25, want, rel) > length // 2
    assert nccl.tolerance("bfloat16", "sum", n) == 0.0
    ints = [_inputs(r, n, length, "int32", "avg") for r in range(n)]
    assert (
        nccl.count_wrong(
            _reduce_in_dtype(ints, "sum") // n, _expected("all_reduce", 0, n, length, 0, "int32", "avg")
        )
        == 0
    )


def _simulate(op: str, n: int, rank: int, chunk: int, count: int, dtype: str, reduce_op: str) -> torch.Tensor:
    """The collective done by hand on every rank's inputs: an oracle independent of expected_values."""
    pattern_op = reduce_op if op in nccl.REDUCING_OPS else None
    if op in ("all_reduce", "reduce"):
        return _reduce_in_dtype([_inputs(j, n, count, dtype, pattern_op) for j in range(n)], reduce_op)
    if op == "reduce_scatter":
        full = _reduce_in_dtype([_inputs(j, n, chunk * n, dtype, pattern_op) for j in range(n)], reduce_op)
        return full[rank * chunk : (rank + 1) * chunk]
    if op == "all_gather":
        return torch.cat([_inputs(j, n, chunk, dtype, None) for j in range(n)])
    if op == "all_to_all":
        return torch.cat(
            [_inputs(j, n, chunk * n, dtype, None)[rank * chunk : (rank + 1) * chunk] for j in range(n)]
        )
    if op == "broadcast":
        return _inputs(nccl.ROOT, n, count, dtype, None)
    return _inputs((rank - 1) % n, n, count, dtype, None)  # sendrecv ring: from rank - 1


@pytest.mark.parametrize("op", nccl.OPS)
@pytest.mark.parametrize("dtype", ["float16", "int8", "bfloat16"])
def test_expected_values_agree_with_a_hand_simulation(op: str, dtype: str) -> None:
    n = 4
    elsize = nccl.DTYPES[dtype].size
    shape = nccl.coll_shape(op, 4096, elsize, n)
    for rank in range(n):
        got = _simulate(op, n, rank, shape.count, shape.count, dtype, "sum")
        want = _expected(op, rank, n, shape.recv_count, shape.count, dtype, "sum")
        assert nccl.count_wrong(got, want) == 0, (op, rank)


def test_checker_catches_planted_errors() -> None:
    n, dtype = 4, "float32"
    shape = nccl.coll_shape("all_gather", 4096, 4, n)
    want = _expected("all_gather", 1, n, shape.recv_count, shape.count, dtype, "sum")
    right = _simulate("all_gather", n, 1, shape.count, shape.count, dtype, "sum")
    assert nccl.count_wrong(right, want) == 0
    # one element off
    one_off = right.clone()
    one_off[17] += 1
    assert nccl.count_wrong(one_off, want) == 1
    # two ranks' chunks swapped: most of both chunks are wrong
    swapped = right.clone()
    c = shape.count
    swapped[:c], swapped[c : 2 * c] = right[c : 2 * c], right[:c]
    assert nccl.count_wrong(swapped, want) > c
    # a NaN is wrong, and so is an output the collective never wrote
    with_nan = right.clone()
    with_nan[3] = float("nan")
    assert nccl.count_wrong(with_nan, want) == 1
    assert nccl.count_wrong(torch.zeros_like(right), want) == right.numel()
    # the wrong peer in the ring, and the wrong reduction
    count = 1024
    from_next = _inputs(2, n, count, dtype, None)  # rank 1 must receive from rank 0, not 2
    assert nccl.count_wrong(from_next, _expected("sendrecv", 1, n, count, 0, dtype, "sum")) > count // 2
    summed = _simulate("all_reduce", n, 0, 0, count, dtype, "sum")
    assert nccl.count_wrong(summed, _expected("all_reduce", 0, n, count, 0, dtype, "max")) > count // 2
    with pytest.raises(ValueError, match="shape mismatch"):
        nccl.count_wrong(right[:-1], want)


# -- real runs on CPU with gloo -------------------------------------------------------------------------------

GLOO_SWEEP: dict[str, Any] = {
    "begin": 8,
    "end": 64 << 10,
    "factor": 4.0,
    "warmup": 2,
    "iters": 5,
    "batches": 3,
}


@pytest.fixture(scope="module")
def gloo_two_ranks() -> nccl.NcclResult:
    config = nccl.NcclConfig(backend="gloo", **GLOO_SWEEP)
    return nccl.launch(config, 2, dict(os.environ), timeout_s=120)


def test_gloo_two_ranks_every_op_is_right(gloo_two_ranks: nccl.NcclResult) -> None:
    result = gloo_two_ranks
    assert result.ranks == 2 and result.backend == "gloo" and result.nccl_version is None
    assert [r.rank for r in result.world] == [0, 1] and all(r.device == "cpu" for r in result.world)
    sizes = size_sweep(8, 64 << 10, 4.0)
    assert sizes == [8, 32, 128, 512, 2048, 8192, 32768]
    by_op: dict[str, list[Any]] = {}
    for m in result.measurements:
        by_op.setdefault(m.params["op"], []).append(m)
    assert list(by_op) == list(nccl.OPS), "gloo runs every op with 2 ranks"
    for op, measured in by_op.items():
        assert len(measured) == len(sizes) * len(nccl.placements(op))
    for m in result.measurements:
        op, inplace = m.params["op"], m.params["inplace"]
        if inplace and op in ("all_to_all", "sendrecv"):
            assert m.extra["wrong"] is None  # nccl-tests' N/A
        else:
            assert m.extra["wrong"] == 0, m.name
        # the JSON keeps Timing to the nanosecond, time_us unrounded
        assert m.timing.median_s > 0 and m.extra["time_us"] == pytest.approx(
            m.timing.median_s * 1e6, abs=1e-3
        )
        assert m.extra["algbw_gbs"] == pytest.approx(
            m.params["size_bytes"] / (m.extra["time_us"] * 1e-6) / 1e9
        )
        assert m.extra["busbw_gbs"] == pytest.approx(m.extra["algbw_gbs"] * nccl.busbw_factor(op, 2))
        assert m.value == m.extra["busbw_gbs"] and m.unit == "GB/s" and m.peak is None
        assert m.timing.batches == 3 and m.timing.inner == 5
        assert m.params["ranks"] == 2 and m.params["backend"] == "gloo" and m.params["dtype"] == "float32"
        assert m.params["reduce_op"] == ("sum" if op in nccl.REDUCING_OPS else None)
        assert m.name.startswith(f"{op} ") and m.name.endswith("in-place" if inplace else "out-of-place")
    # 8 B all_gather: 2 floats cannot be split into 16-byte chunks over 2 ranks -> size 0, as nccl-tests
    first_gather = by_op["all_gather"][0]
    assert first_gather.params["size_bytes"] == 0 and first_gather.extra["algbw_gbs"] == 0.0
    for op, measured in by_op.items():
        mean = sum(m.extra["busbw_gbs"] for m in measured) / len(measured)
        assert result.avg_busbw[op] == pytest.approx(mean)
    assert result.wrong == 0
    assert any("in-place only" in note for note in result.notes)


def test_gloo_result_json_round_trip(gloo_two_ranks: nccl.NcclResult) -> None:
    payload = gloo_two_ranks.to_json()
    assert payload["schema"] == BENCH_SCHEMA and payload["suite"] == "nccl"
    again = nccl.NcclResult.from_json(json.loads(json.dumps(payload)))
    assert again.to_json() == payload
    with pytest.raises(BenchError, match="not an nccl bench result"):
        nccl.NcclResult.from_json({**payload, "suite": "gemm"})


def test_gloo_two_ranks_low_precision_reductions() -> None:
    config = nccl.NcclConfig(
        ops=["all_reduce", "reduce_scatter", "reduce"],
        dtype="bfloat16",
        reduce_op="prod",
        begin=64,
        end=4096,
        factor=8.0,
        warmup=1,
        iters=2,
        batches=2,
        backend="gloo",
    )
    result = nccl.launch(config, 2, dict(os.environ), timeout_s=120)
    assert len(result.measurements) == 3 * (1 + 2 + 1)
    assert all(m.extra["wrong"] == 0 for m in result.measurements)
    assert {m.params["reduce_op"] for m in result.measurements} == {"prod"}


def test_single_rank_without_world_size() -> None:
    import torch.distributed as dist

    config = nccl.NcclConfig(begin=1024, end=4096, factor=4.0, warmup=1, iters=3, batches=2, backend="gloo")
    result = nccl.run_collectives(config, env={})
    assert result is not None and result.ranks == 1
    assert not dist.is_initialized(), "the one-rank group must be destroyed"
    by_op = {(m.params["op"], m.params["size_bytes"], m.params["inplace"]): m for m in result.measurements}
    all_reduce = by_op[("all_reduce", 4096, True)]
    assert all_reduce.extra["busbw_gbs"] == 0.0 and all_reduce.extra["algbw_gbs"] > 0
    broadcast = by_op[("broadcast", 4096, False)]
    assert broadcast.extra["busbw_gbs"] == broadcast.extra["algbw_gbs"] > 0
    assert all(m.extra["wrong"] in (0, None) for m in result.measurements)
    assert result.avg_busbw["all_reduce"] == 0.0
    assert "sendrecv" not in {m.params["op"] for m in result.measurements}
    assert any(note.startswith("single rank") and "algbw" in note for note in result.notes)
    assert any("sendrecv skipped" in note for note in result.notes)


# -- launch: refusals, failures, and the environment ----------------------------------------------------------


def _no_launch(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("launch must refuse before starting torchrun")


def test_nccl_without_gpus_is_refused_before_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "Popen", _no_launch)
    monkeypatch.setattr(nccl, "_cuda_gpus", lambda: 0)
    with pytest.raises(
        BenchError, match=r"asked for 1 GPUs with backend nccl, this node has 0 .*use backend gloo"
    ):
        nccl.launch(nccl.NcclConfig(backend="nccl"), 1, {}, timeout_s=10)
    monkeypatch.setattr(nccl, "_cuda_gpus", lambda: 1)
    with pytest.raises(BenchError, match=r"asked for 8 GPUs with backend nccl, this node has 1$"):
        nccl.launch(nccl.NcclConfig(backend="nccl"), 8, {}, timeout_s=10)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_nccl_on_this_gpu_less_machine_is_refused() -> None:
    for nproc in (1, 2, 8):
        with pytest.raises(BenchError, match=f"asked for {nproc} GPUs with backend nccl, this node has 0"):
            nccl.launch(nccl.NcclConfig(backend="nccl"), nproc, dict(os.environ), timeout_s=10)
    with pytest.raises(BenchError, match="needs a CUDA GPU"):
        nccl.run_collectives(nccl.NcclConfig(backend="nccl"), env={})


def _fake_python(tmp_path: Path, body: str) -> str:
    """A stand-in for sys.executable: the shell script ``body`` receives torchrun's arguments."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_failing_worker_raises_with_the_end_of_its_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = _fake_python(tmp_path, 'echo "warming up"; echo "NCCL WARN: unhandled system error" >&2; exit 3')
    monkeypatch.setattr(sys, "executable", fake)
    with pytest.raises(BenchError, match=r"exit status 3(.|\n)*unhandled system error"):
        nccl.launch(nccl.NcclConfig(backend="gloo"), 2, {}, timeout_s=30)


def test_worker_that_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", _fake_python(tmp_path, "echo done; exit 0"))
    with pytest.raises(BenchError, match=r"wrote no result(.|\n)*done"):
        nccl.launch(nccl.NcclConfig(backend="gloo"), 2, {}, timeout_s=30)


def test_worker_timeout_is_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", _fake_python(tmp_path, "echo started; exec sleep 60"))
    with pytest.raises(BenchError, match=r"did not finish within 1 s(.|\n)*started"):
        nccl.launch(nccl.NcclConfig(backend="gloo"), 2, {}, timeout_s=1.0)


def test_launch_passes_the_environment_unchanged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The fake torchrun records its environment and arguments, then writes a valid result where --out says.
    result = nccl.NcclResult(
        measurements=[],
        avg_busbw={},
        ranks=2,
        backend="gloo",
        world=[],
        nccl_version=None,
        config=nccl.NcclConfig(backend="gloo"),
    )
    (tmp_path / "result.json").write_text(json.dumps(result.to_json()))
    body = (
        f'env > "{tmp_path}/env.txt"; printf "%s\\n" "$@" > "{tmp_path}/args.txt"; '
        f'while [ "$1" != "--out" ]; do shift; done; cp "{tmp_path}/result.json" "$2"'
    )
    monkeypatch.setattr(sys, "executable", _fake_python(tmp_path, body))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
        "NCCL_DEBUG": "WARN",
        "CUDA_VISIBLE_DEVICES": "",
    }
    got = nccl.launch(nccl.NcclConfig(backend="gloo", ops=["all_gather"]), 2, env, timeout_s=30)
    assert got.ranks == 2
    seen = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines() if "=" in line)
    for key, value in env.items():
        assert seen.get(key) == value, key
    args = (tmp_path / "args.txt").read_text().splitlines()
    assert args[:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
    assert args[6] == "dgxperf.bench.nccl_worker"
    sent = json.loads(args[args.index("--config") + 1])
    assert sent["backend"] == "gloo" and sent["ops"] == ["all_gather"]


# -- the worker entry point -----------------------------------------------------------------------------------


def test_worker_writes_atomically(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "result.json"
    nccl_worker.write_atomically(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["result.json"]


def test_worker_refuses_a_bad_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert nccl_worker.main(["--config", '{"ops": ["allreduce"]}']) == 2
    assert "unknown collective" in capsys.readouterr().err
    assert nccl_worker.main(["--config", "[1, 2]"]) == 2


def test_worker_single_rank_writes_the_result(tmp_path: Path) -> None:
    if "WORLD_SIZE" in os.environ:
        pytest.skip("running under a launcher: the worker would join its world")
    out = tmp_path / "result.json"
    config = {"ops": ["all_reduce", "all_gather"], "begin": 256, "end": 256, "backend": "gloo", "iters": 2}
    assert nccl_worker.main(["--config", json.dumps(config), "--out", str(out)]) == 0
    result = nccl.NcclResult.from_json(json.loads(out.read_text()))
    assert result.ranks == 1 and [m.params["op"] for m in result.measurements] == [
        "all_reduce",
        "all_gather",
        "all_gather",
    ]


def test_worker_import_runs_nothing() -> None:
    probe = "import sys, dgxperf.bench.nccl_worker; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False" and done.stderr == ""
