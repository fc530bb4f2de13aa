"""The memory planner against what PyTorch really keeps and allocates.

There is no GPU here, so the checks are, from the strongest down:

1. Saved tensors on CPU: run the real encoder forward (fp32 and bf16 autocast, checkpointing on and off)
   under ``torch.autograd.graph.saved_tensors_hooks`` and add up the storages autograd keeps for backward
   (deduplicated by storage, parameters excluded). Two CPU/CUDA differences are bridged: ``F.dropout`` is
   routed to ``torch.native_dropout`` (what CUDA's fused dropout runs: a bool mask; CPU's composite dropout
   keeps a float mask), and attention dropout is off so CPU SDPA takes its flash kernel (which keeps what
   CUDA's does: q, k, v, output, logsumexp) rather than the math fallback.
2. A whole training step on meta tensors, with every storage's lifetime tracked by a TorchDispatchMode:
   forward, loss, backward, AdamW (PyTorch's own foreach code), zero_grad(set_to_none) — CUDA's autocast
   policy emulated for the ops the encoder uses. This checks the transient and optimizer peaks.
3. The H200 measurements: the train probe's peaks already in docs/benchmarks, and the planner's own
   measured table (tests/data/h200/plan/memory-measurements.json) once it exists.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from dgxperf.hw.specs import get_spec
from dgxperf.plan import memory as pm
from dgxperf.train import parallel
from dgxperf.train.loop import SYNTHETIC_VOCAB, make_optimizer
from dgxperf.train.model import PRESETS, Encoder, ModelConfig, param_count, preset
from dgxperf.train.recipes import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT / "tests" / "data" / "h200" / "plan" / "memory-measurements.json"
PROBE = ROOT / "docs" / "benchmarks" / "2026-12-02-h200-train-probe" / "probe.jsonl"

# A small encoder whose every dimension differs (h, f, a, L, s, b, labels), so a wrong term shows.
SMALL: dict[str, Any] = {
    "vocab_size": 300,
    "num_labels": 3,
    "max_len": 48,
    "hidden": 96,
    "layers": 3,
    "heads": 4,
    "ffn": 320,
}


def _shape(config: ModelConfig) -> pm.ModelShape:
    return pm.ModelShape(
        config.layers, config.hidden, config.heads, config.ffn, config.vocab_size, config.max_len,
        config.num_labels, pooler=config.pooler, pooling=config.pooling,
    )  # fmt: skip


def _cuda_dropout(
    x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    # CUDA runs dropout as native_dropout (a bool mask); CPU's composite dropout keeps a float mask.
    return torch.native_dropout(x, p, True)[0] if training and p > 0 else x


# -- 1. saved tensors on CPU -----------------------------------------------------------------------------------


def saved_bytes(model: Encoder, batch: int, seq: int, precision: str, *, checkpointing: bool) -> int:
    """Bytes of the distinct storages autograd keeps between forward and backward (parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def keep(t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()

    def pack(t: torch.Tensor) -> torch.Tensor:
        keep(t)
        return t

    if checkpointing:
        # Non-reentrant checkpointing packs nothing inside a block: it keeps the block's input alive in
        # its recompute closure instead, which the hooks cannot see.
        for block in model.blocks:
            block.register_forward_pre_hook(lambda _m, args: keep(args[0]))
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(4, model.config.vocab_size, (batch, seq), generator=generator)
    labels = torch.randint(0, model.config.num_labels, (batch,), generator=generator)
    autocast = (
        torch.autocast("cpu", dtype=torch.bfloat16) if precision == "amp-bf16" else contextlib.nullcontext()
    )
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        logits = model(ids, None)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        F.cross_entropy(logits.float(), labels)
    return sum(kept.values())


CASES = [
    pytest.param("fp32", False, {}, id="fp32"),
    pytest.param("fp32", True, {}, id="fp32-ckpt"),
    pytest.param("amp-bf16", False, {}, id="bf16-autocast"),
    pytest.param("amp-bf16", True, {}, id="bf16-autocast-ckpt"),
    pytest.param("amp-bf16", False, {"dropout": 0.0}, id="bf16-no-dropout"),
    pytest.param("fp32", False, {"pooling": "mean", "pooler": False}, id="fp32-mean-no-pooler"),
    pytest.param("amp-bf16", True, {"pooler": False, "ln_fp32": True}, id="bf16-ckpt-no-pooler-ln32"),
    pytest.param("bf16", False, {"ln_fp32": True}, id="pure-bf16-ln32"),
]


@pytest.mark.parametrize(("precision", "checkpointing", "overrides"), CASES)
def test_activation_estimate_matches_the_tensors_autograd_keeps(
    monkeypatch: pytest.MonkeyPatch, precision: str, checkpointing: bool, overrides: dict[str, Any]
) -> None:
    monkeypatch.setattr(F, "dropout", _cuda_dropout)
    config = ModelConfig(**SMALL | {"attn_dropout": 0.0} | overrides)
    torch.manual_seed(0)
    model = Encoder(config)
    if precision == "bf16":
        model.to(torch.bfloat16)  # pure bf16: no fp32 master weights
    if checkpointing:
        parallel.checkpoint_blocks(model)
    model.train()
    measured = saved_bytes(model, 5, 40, precision, checkpointing=checkpointing)
    inputs = pm.MemoryInputs(
        _shape(config), seq_len=40, micro_batch=5, precision=precision, activation_checkpointing=checkpointing,
        dropout=config.dropout, attn_dropout=0.0, attention="flash", ln_fp32=config.ln_fp32,
    )  # fmt: skip
    estimate = pm.estimate(inputs)
    predicted = estimate.activation_bytes + estimate.totals["saved_weight_copies"]
    assert predicted == pytest.approx(measured, rel=0.01), (predicted, measured)


def test_math_attention_keeps_the_s_by_s_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "dropout", _cuda_dropout)
    config = ModelConfig(**SMALL | {"attn_dropout": 0.1})
    torch.manual_seed(0)
    model = Encoder(config).train()
    with sdpa_kernel(SDPBackend.MATH):
        measured = saved_bytes(model, 5, 40, "fp32", checkpointing=False)
    estimate = pm.estimate(
        pm.MemoryInputs(_shape(config), seq_len=40, micro_batch=5, precision="fp32", attention="math")
    )
    # Inside SDPA's math path the attention dropout is ATen's, which on CPU keeps a float mask (4 bytes
    # per score where CUDA keeps a bool): 3 more bytes per score here.
    cpu_mask = 3 * config.heads * 40 * 40 * 5 * config.layers
    assert estimate.activation_bytes + cpu_mask == pytest.approx(measured, rel=0.01)
    fused = pm.estimate(pm.MemoryInputs(_shape(config), seq_len=40, micro_batch=5, precision="fp32"))
    assert estimate.activation_bytes > fused.activation_bytes


# -- 2. a whole step on meta tensors -----------------------------------------------------------------------


class _Allocations(TorchDispatchMode):  # type: ignore[misc]
    """Live and peak bytes of every storage an op creates, freed when the storage dies; sizes are rounded
    to the CUDA caching allocator's 512 bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._storages: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def _free(self, size: int, _ref: object) -> None:
        self.live -= size

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type == "meta":
                storage = t.untyped_storage()
                if storage in self._storages or storage.nbytes() == 0:
                    continue
                size = -(-storage.nbytes() // 512) * 512
                self._storages[storage] = weakref.ref(storage, functools.partial(self._free, size))
                self.live += size
                self.peak = max(self.peak, self.live)
        return out


class _CudaAutocast:
    """CUDA autocast's policy for the ops the encoder calls, on meta tensors (autocast has no meta mode):
    Linear and SDPA in the low dtype with fp32 parameters cast once per forward (a cache cleared when the
    outermost region exits), LayerNorm in fp32, everything else in its input's dtype."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dtype: torch.dtype | None = None
        self.depth = 0
        self.cache: dict[torch.Tensor, torch.Tensor] = {}
        linear, layer_norm = F.linear, F.layer_norm

        def cast(t: torch.Tensor | None, dtype: torch.dtype | None) -> torch.Tensor | None:
            if t is None or dtype is None or t.dtype == dtype:
                return t
            if isinstance(t, torch.nn.Parameter):
                if t not in self.cache:
                    self.cache[t] = t.to(dtype)
                return self.cache[t]
            return t.to(dtype)

        def low() -> torch.dtype | None:
            return self.dtype if self.depth else None

        def auto_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
            return linear(cast(x, low()), cast(w, low()), cast(b, low()))

        def auto_layer_norm(
            x: torch.Tensor, shape: Any, w: Any = None, b: Any = None, eps: float = 1e-5
        ) -> Any:
            if low() is not None:
                x, w, b = cast(x, torch.float32), cast(w, torch.float32), cast(b, torch.float32)
            return layer_norm(x, shape, w, b, eps)

        def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
                 is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> torch.Tensor:  # fmt: skip
            q, k, v = (cast(t, low()) for t in (q, k, v))  # type: ignore[assignment]
            # The memory-efficient kernel's meta function gives CUDA's output layout; with s a multiple of
            # 32 it keeps exactly what FlashAttention keeps.
            return torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, dropout_p)[0]

        monkeypatch.setattr(F, "linear", auto_linear)
        monkeypatch.setattr(F, "layer_norm", auto_layer_norm)
        monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)
        monkeypatch.setattr(F, "dropout", _cuda_dropout)

    @contextlib.contextmanager
    def region(self, dtype: torch.dtype | None) -> Iterator[None]:
        previous = self.dtype
        self.dtype, self.depth = dtype, self.depth + 1
        try:
            yield
        finally:
            self.dtype, self.depth = previous, self.depth - 1
            if not self.depth:
                self.cache.clear()


@torch.no_grad()  # type: ignore[untyped-decorator]
def _fused_adamw_step(optimizer: torch.optim.Optimizer) -> None:
    """What fused AdamW allocates: its states on the first step, nothing after (it updates in place)."""
    for group in optimizer.param_groups:
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            state = optimizer.state[p]
            if not state:
                state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
        grads = [p.grad for p in params]
        exp_avgs = [optimizer.state[p]["exp_avg"] for p in params]
        exp_avg_sqs = [optimizer.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(exp_avgs, grads, 0.1)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 0.02)
        torch._foreach_addcdiv_(params, exp_avgs, exp_avg_sqs, 1e-3)


def step_peaks(
    monkeypatch: pytest.MonkeyPatch, config: ModelConfig, train: TrainConfig, *, eval_batch: int
) -> tuple[int, int]:
    """(peak of the second training step, peak of an evaluation forward) on meta tensors."""
    autocast = _CudaAutocast(monkeypatch)
    dtype = parallel.autocast_dtype(train)
    tracker = _Allocations()
    with tracker:
        with torch.device("meta"):
            model = Encoder(config)
        model.train()
        if train.activation_checkpointing:
            from torch.utils.checkpoint import checkpoint

            for block in model.blocks:

                def inner(x: Any, mask: Any, _forward: Callable[..., Any] = block.forward) -> Any:
                    if autocast.depth:  # the forward: already inside the autocast region
                        return _forward(x, mask)
                    with autocast.region(dtype):  # the recompute: checkpoint restores the autocast state
                        return _forward(x, mask)

                def run(x: Any, mask: Any, _inner: Callable[..., Any] = inner) -> Any:
                    return checkpoint(_inner, x, mask, use_reentrant=False, preserve_rng_state=False)

                block.forward = run
        optimizer = make_optimizer(model, train, 1e-4, None)  # type: ignore[arg-type]  # unused on one process
        for group in optimizer.param_groups:
            group["foreach"] = True  # what CUDA parameters get by default; meta ones would get a for loop
        batch, seq = train.batch_size, train.max_len
        for _ in range(2):
            tracker.peak = tracker.live
            ids = torch.randint(4, config.vocab_size, (batch, seq), device="meta")
            labels = torch.randint(0, config.num_labels, (batch,), device="meta")
            with autocast.region(dtype) if dtype else contextlib.nullcontext():
                logits = model(ids, None)
            F.cross_entropy(logits.float(), labels).backward()
            del logits
            # clip_grad_norm_ (per-tensor norms, an in-place scale) allocates a few bytes: left out.
            if train.fused_optimizer:
                _fused_adamw_step(optimizer)
            else:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        train_peak = tracker.peak
        model.eval()
        tracker.peak = tracker.live
        with torch.no_grad(), autocast.region(dtype) if dtype else contextlib.nullcontext():
            model(torch.randint(4, config.vocab_size, (eval_batch, seq), device="meta"), None)
        return train_peak, tracker.peak


STEP_CASES = [
    pytest.param("fp32", False, False, 8, {}, id="fp32-foreach"),
    pytest.param("fp32", True, False, 16, {}, id="fp32-foreach-ckpt"),
    pytest.param("bf16", False, True, 8, {}, id="bf16-fused"),
    pytest.param("bf16", True, True, 16, {}, id="bf16-fused-ckpt"),
    pytest.param("fp16", False, False, 1, {}, id="fp16-foreach-batch1"),  # small batch: the optimizer's peak
    pytest.param(
        "fp16", False, False, 32, {"ffn": 256, "pooling": "mean", "dropout": 0.0}, id="fp16-mean-f2h"
    ),
]


@pytest.mark.parametrize(("precision", "checkpointing", "fused", "batch", "overrides"), STEP_CASES)
def test_peak_matches_a_whole_training_step_on_meta_tensors(
    monkeypatch: pytest.MonkeyPatch,
    precision: str,
    checkpointing: bool,
    fused: bool,
    batch: int,
    overrides: dict[str, Any],
) -> None:
    config = ModelConfig(**SMALL | {"hidden": 128, "ffn": 448, "max_len": 64, "vocab_size": 500} | overrides)
    fields: dict[str, Any] = {
        "precision": precision, "fused_optimizer": fused, "activation_checkpointing": checkpointing,
        "batch_size": batch, "max_len": 64, "task": "synthetic", "eval_batch_size": 24,
        "dropout": config.dropout, "attn_dropout": config.attn_dropout, "pooling": config.pooling,
    }  # fmt: skip
    train = dataclasses.replace(TrainConfig(), **fields)
    measured, measured_eval = step_peaks(monkeypatch, config, train, eval_batch=24)
    inputs = dataclasses.replace(
        pm.inputs_for_train_config(fields, 500, 3), shape=_shape(config), attention="flash"
    )
    estimate = pm.estimate(inputs)
    workspace = estimate.totals["workspace"]  # cuBLAS: nothing allocates it on meta tensors
    phases = {name: sum(parts.values()) - workspace for name, parts in estimate.phases.items()}
    training = max(phases, key=lambda name: phases[name] if name != "evaluation" else 0)
    assert phases[training] == pytest.approx(measured, rel=0.03), training
    assert phases["evaluation"] == pytest.approx(measured_eval, rel=0.03)


# -- the formulas and their adjustments --------------------------------------------------------------------


def test_published_formula_and_our_adjusted_per_layer_bytes() -> None:
    s, b, h, a = 128, 1, 1024, 16
    assert pm.korthikanti_layer_bytes(s, b, h, a) == s * b * h * (34 + 5 * a * s // h)
    assert pm.korthikanti_layer_bytes(s, b, h, a, "full") == 2 * s * b * h
    shape = pm.shape_from_preset("large", vocab_size=SYNTHETIC_VOCAB)
    per_token = {
        precision: sum(r.bytes_per_token for r in pm.block_saved_tensors(shape, s, precision=precision))
        for precision in ("amp-bf16", "fp32")
    }
    # autocast: fp32 LayerNorm inputs (+4h), no s x s scores (-5as), 16 B of statistics, fp32 logsumexp
    assert per_token["amp-bf16"] == 38 * h + 16 + 4 * a
    assert per_token["fp32"] == 66 * h + 16 + 4 * a
    checkpointed = pm.estimate(
        pm.MemoryInputs(shape, seq_len=s, micro_batch=b, activation_checkpointing=True)
    )
    assert checkpointed.activation_bytes_per_layer == 4 * s * b * h  # the fp32 residual stream, not 2sbh


def test_peak_moment_moves_from_the_backward_to_the_optimizer_step_as_the_batch_shrinks() -> None:
    shape = pm.shape_from_preset("large", vocab_size=SYNTHETIC_VOCAB)
    big = pm.estimate(pm.MemoryInputs(shape, micro_batch=64))
    assert big.peak_phase == "backward start"
    assert "gradients" not in big.components  # set_to_none: no gradients during the forward
    small = pm.estimate(pm.MemoryInputs(shape, micro_batch=1, precision="fp32"))
    assert small.peak_phase == "optimizer step"
    assert small.components["gradients"] == 4 * shape.params
    assert small.components["transient"] == 4 * shape.linear_weights  # foreach AdamW's sqrt(v), decay group
    fused = pm.estimate(pm.MemoryInputs(shape, micro_batch=1, precision="fp32", fused_optimizer=True))
    assert fused.peak_bytes < small.peak_bytes


def test_sharding_offload_and_optimizers() -> None:
    shape = pm.shape_from_preset("base")
    p = shape.params

    def est(**kw: Any) -> pm.MemoryEstimate:
        return pm.estimate(pm.MemoryInputs(shape, **kw))

    plain, ddp = est(), est(gpus=8)
    assert plain.totals["optimizer_states"] == 8 * p
    assert ddp.components["ddp_buckets"] == 4 * p  # kept through the forward
    assert est(gpus=8, sharding="zero1").totals["optimizer_states"] == 8 * p // 8
    zero2 = est(gpus=8, sharding="zero2")
    assert zero2.totals["gradients"] == 4 * p // 8 and "ddp_buckets" not in zero2.components
    zero3 = est(gpus=8, sharding="zero3")
    assert zero3.totals["weights"] == 4 * p // 8 and zero3.components["gathered_params"] > 0
    assert zero3.totals["autocast_weight_copies"] == 0  # FSDP gathers bf16 weights: nothing to cast
    one = est(sharding="zero3")
    assert one.peak_bytes == plain.peak_bytes and "shards nothing" in " ".join(one.notes)
    offload = est(cpu_offload=True)
    assert offload.totals["optimizer_states"] == 0 and offload.host_bytes >= 8 * p
    assert est(optimizer="sgd").totals["optimizer_states"] == 4 * p
    assert est(optimizer="adafactor").totals["optimizer_states"] < p  # factored second moments
    assert est(optimizer="lamb").totals["optimizer_states"] == 8 * p
    pure = est(precision="bf16")
    assert pure.totals["weights"] == 2 * p and pure.totals["optimizer_states"] == 4 * p


def test_largest_micro_batch_is_the_edge_of_fitting() -> None:
    inputs = pm.MemoryInputs(pm.shape_from_preset("large", vocab_size=SYNTHETIC_VOCAB))
    usable = 40 * pm.GIB
    best = pm.max_micro_batch(inputs, usable)
    needed = [
        pm.estimate(dataclasses.replace(inputs, micro_batch=b)).peak_bytes * (1 + pm.DEFAULT_MARGIN)
        for b in (best, best + 1)
    ]
    assert needed[0] <= usable < needed[1]
    assert pm.max_micro_batch(inputs, 1 * pm.GIB) == 0


def test_gpu_table_covers_the_asked_boards_and_agrees_with_the_datasheets() -> None:
    names = [gpu.name for gpu in pm.GPU_MODELS]
    assert names == ["V100 32GB", "A100 40GB", "A100 80GB", "H100 80GB", "H200 141GB", "L40S 48GB"]
    for gpu in pm.GPU_MODELS:
        spec = get_spec(gpu.spec_key)
        # nvidia-smi's total sits a little under the datasheet's size (the L40S's GDDR6 gives 1/16 to ECC).
        assert gpu.total_mib / 1024 == pytest.approx(spec.memory_gb, rel=0.07), gpu.name
        assert gpu.bf16 == ("bf16" in spec.tflops)
    inputs = pm.MemoryInputs(pm.shape_from_preset("large"), micro_batch=64)
    table = {fit.gpu.name: fit for fit in pm.gpu_fit_table(inputs)}
    assert table["V100 32GB"].max_micro_batch == -1  # no bf16
    assert (
        table["H200 141GB"].fits and table["H200 141GB"].max_micro_batch > table["A100 40GB"].max_micro_batch
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"micro_batch": 0}, "micro-batch must be a positive integer"),
        ({"precision": "fp8"}, "unknown precision"),
        ({"optimizer": "adam"}, "unknown optimizer"),
        ({"sharding": "zero4"}, "unknown sharding"),
        ({"seq_len": 4096}, "exceeds"),
        ({"dropout": 1.0}, "dropout"),
    ],
)
def test_bad_inputs_say_what_is_wrong(change: dict[str, Any], message: str) -> None:
    with pytest.raises(pm.PlanError, match=message):
        pm.MemoryInputs(pm.shape_from_preset("tiny"), **change)


def test_bad_shapes_say_what_is_wrong() -> None:
    with pytest.raises(pm.PlanError, match="must divide hidden"):
        pm.ModelShape(2, 100, 3, 400, 1000, 128)
    with pytest.raises(pm.PlanError, match="unknown preset"):
        pm.shape_from_preset("huge")
    with pytest.raises(pm.PlanError, match="positive"):
        pm.shape_from_params(0)


def test_presets_and_parameter_count_mirror_the_model() -> None:
    assert {k: dict(v) for k, v in pm.PRESETS.items()} == {k: dict(v) for k, v in PRESETS.items()}
    assert pm.SYNTHETIC_VOCAB == SYNTHETIC_VOCAB
    for name in PRESETS:
        for pooler in (True, False):
            config = preset(name, vocab_size=3635, num_labels=3, max_len=200, pooler=pooler)
            shape = pm.shape_from_preset(name, vocab_size=3635, max_len=200, num_labels=3, pooler=pooler)
            assert shape.params == param_count(config)
            assert sum(torch.Size(s).numel() for s in shape.tensor_shapes()) == shape.params
            if name == "tiny":  # building the others would cost seconds; the count is the same formula
                linear = [m for m in Encoder(config).modules() if isinstance(m, torch.nn.Linear)]
                assert shape.linear_weights == sum(m.weight.numel() for m in linear)
                assert shape.linear_biases == sum(m.bias.numel() for m in linear)
    rough = pm.shape_from_params(350_000_000)
    assert rough.inferred and rough.params == pytest.approx(350e6, rel=0.05)


def test_train_config_mapping_follows_the_recipes() -> None:
    fields = dataclasses.asdict(
        dataclasses.replace(TrainConfig(), precision="fp16", ln_fp32=True, grad_accum=2)
    )
    inputs = pm.inputs_for_train_config(fields, 3635)
    assert (inputs.precision, inputs.padding_mask, inputs.grad_accum, inputs.eval_batch) == (
        "amp-fp16",
        True,
        2,
        256,
    )
    synthetic = pm.inputs_for_train_config(
        {"task": "synthetic", "precision": "bf16", "fsdp": True}, 21128, gpus=4
    )
    assert synthetic.padding_mask is False and synthetic.zero_stage == 3
    compiled = pm.estimate_for_train_config({"compile": True}, 3635)
    assert any("eager" in note for note in compiled.notes)
    with pytest.raises(pm.PlanError, match="precision"):
        pm.inputs_for_train_config({"precision": "int8"}, 3635)


def test_r_drop_runs_are_estimated_with_their_doubled_rows() -> None:
    """`guide` fine-tunes on an H100 with and without R-Drop (2026-12-06-h100-rdrop, eager step): each row
    twice in one forward keeps twice the activations, and the estimate follows within 1%; counted once, it
    would miss R-Drop's run by 30%."""
    bench = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "2026-12-06-h100-rdrop"
    rows = [
        json.loads((bench / run / "result.json").read_text()) for run in ("guide-s1", "guide-s1-rdrop_alpha4")
    ]
    assert [row["config"]["rdrop_alpha"] for row in rows] == [0.0, 4.0]
    checked = pm.check_against_measurements(rows)
    assert all(abs(error) < 1.5 for _, _, _, error in checked), checked
    single = pm.inputs_for_train_config(
        {**rows[1]["config"], "rdrop_alpha": 0.0}, rows[1]["model"]["vocab_size"]
    )
    assert pm.inputs_for_train_config(rows[1]["config"], rows[1]["model"]["vocab_size"]).micro_batch == 64
    assert single.micro_batch == 32
    half = pm.inputs_for_train_config(
        {**rows[1]["config"], "rdrop_share": 0.5}, rows[1]["model"]["vocab_size"]
    )
    assert half.micro_batch == 48  # 32 rows and every other one again


def test_the_planners_r_drop_rows_agree_with_the_training_step() -> None:
    from dgxperf.train.objective import rows_through_model

    for batch in (1, 7, 32, 128):
        for alpha in (0.0, 4.0):
            for share in (0.01, 0.5, 0.99, 1.0):
                assert pm.rows_per_step(batch, alpha, share) == rows_through_model(batch, alpha, share)


def test_check_against_measurements_reads_both_row_forms() -> None:
    config: dict[str, Any] = {
        "task": "synthetic",
        "precision": "bf16",
        "fused_optimizer": True,
        "batch_size": 64,
    }
    expected = pm.estimate_for_train_config(config, SYNTHETIC_VOCAB).peak_bytes
    result_json = {
        "config": dataclasses.asdict(dataclasses.replace(TrainConfig(), **config)),
        "model": {"vocab_size": SYNTHETIC_VOCAB, "num_labels": 2},
        "world": {"world_size": 1},
        "summary": {"peak_memory_bytes": expected},
    }
    plain = {"name": "x", "config": config, "vocab_size": SYNTHETIC_VOCAB, "measured_bytes": expected // 2}
    rows = pm.check_against_measurements([result_json, plain])
    assert rows[0][1:] == (expected, expected, 0.0)
    assert rows[1][0] == "x" and rows[1][3] == pytest.approx(100.0, abs=1e-3)


# -- 3. the H200 ------------------------------------------------------------------------------------------------


def test_the_train_probes_h200_peaks() -> None:
    """docs/benchmarks' probe: preset large, vocab 21,128, fixed length 128, fused AdamW, eager; peak_mem_gb
    is torch.cuda.max_memory_allocated / 1e9 over steady-state steps (PyTorch 2.11, H200)."""
    rows = [json.loads(line) for line in PROBE.read_text().splitlines() if line.strip()]
    eager = [r for r in rows if not r["compile"] and not r.get("whole_compile_mode")]
    assert len(eager) == 2
    shape = pm.shape_from_preset("large", vocab_size=SYNTHETIC_VOCAB)
    for row in eager:
        precision = {"bf16": "amp-bf16", "fp16": "amp-fp16"}[row["precision"]]
        inputs = pm.MemoryInputs(shape, micro_batch=row["batch"], precision=precision, fused_optimizer=True)
        assert shape.params == row["params"]
        assert pm.estimate(inputs).peak_bytes / 1e9 == pytest.approx(row["peak_mem_gb"], rel=0.03), row[
            "name"
        ]


def test_the_measured_h200_table() -> None:
    if not MEASUREMENTS.exists():
        pytest.skip(
            f"{MEASUREMENTS.relative_to(ROOT)} does not exist yet: run scripts/h200/measure_memory.sh on the "
            "H200 and store its mem-*.json results there (a list, or {'rows': [...]})"
        )
    data = json.loads(MEASUREMENTS.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    assert len(rows) >= 8
    report = pm.check_against_measurements(rows)
    worst = max(report, key=lambda r: abs(r[3]))
    assert all(abs(error) <= 10.0 for *_, error in report), f"worst: {worst}; all: {report}"
