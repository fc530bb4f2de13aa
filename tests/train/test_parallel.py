"""What parallel.py applies to the model from outside it: activation checkpointing; the bf16 residual
stream; whole-model compile; the compile counter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from dgxperf.train import parallel
from dgxperf.train.model import Encoder, preset
from dgxperf.train.recipes import get_recipe


def _loss_and_grads(
    model: Encoder, ids: torch.Tensor, mask: torch.Tensor
) -> tuple[float, dict[str, torch.Tensor]]:
    torch.manual_seed(7)  # the same dropout masks in both runs
    loss = F.cross_entropy(model(ids, mask), torch.tensor([0, 1, 1, 0]))
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_activation_checkpointing_gives_the_same_loss_and_gradients_and_keeps_names() -> None:
    config = preset("tiny", vocab_size=40, num_labels=2, max_len=16)  # dropout on: masks must replay
    torch.manual_seed(0)
    plain = Encoder(config)
    checkpointed = Encoder(config)
    checkpointed.load_state_dict(plain.state_dict())
    parallel.checkpoint_blocks(checkpointed)
    assert list(checkpointed.state_dict()) == list(plain.state_dict())
    ids = torch.randint(1, 40, (4, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[2, 6:] = False
    loss_a, grads_a = _loss_and_grads(plain, ids, mask)
    loss_b, grads_b = _loss_and_grads(checkpointed, ids, mask)
    assert loss_a == loss_b
    assert grads_a.keys() == grads_b.keys() and len(grads_a) == len(list(plain.parameters()))
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], msg=name)


def test_activation_checkpointing_recomputes_each_block_in_backward() -> None:
    torch.manual_seed(0)
    model = Encoder(preset("tiny", vocab_size=40, num_labels=2, max_len=16))
    parallel.checkpoint_blocks(model)
    calls: list[int] = []
    model.blocks[0].attn.register_forward_hook(lambda *_: calls.append(1))
    ids = torch.randint(1, 40, (2, 8))
    loss = F.cross_entropy(model(ids, None), torch.tensor([0, 1]))
    assert len(calls) == 1
    loss.backward()
    assert len(calls) == 2  # the forward ran again during backward: its activations were not kept


def _block_dtypes(model: Encoder, ids: torch.Tensor) -> tuple[list[torch.dtype], torch.Tensor]:
    """Under bf16 autocast: the dtype of the stream entering each block and leaving the last, and the loss."""
    seen: list[torch.dtype] = []
    for block in model.blocks:
        block.register_forward_pre_hook(lambda _m, args: seen.append(args[0].dtype))
    model.blocks[-1].register_forward_hook(lambda _m, _a, out: seen.append(out.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids, None)
    assert logits.dtype == torch.float32  # the head still hands the loss fp32
    return seen, F.cross_entropy(logits, torch.tensor([0, 1]))


def test_the_bf16_residual_stream_runs_every_block_in_bf16_and_keeps_the_model_as_it_was() -> None:
    config = preset("tiny", vocab_size=40, num_labels=2, max_len=16)
    torch.manual_seed(0)
    plain = Encoder(config)
    cast = Encoder(config)
    cast.load_state_dict(plain.state_dict())
    parallel.bf16_residual(cast)
    assert list(cast.state_dict()) == list(plain.state_dict())  # checkpoints load either way
    ids = torch.randint(1, 40, (2, 8), generator=torch.Generator().manual_seed(1))
    plain_dtypes, _ = _block_dtypes(plain, ids)
    cast_dtypes, loss = _block_dtypes(cast, ids)
    assert set(plain_dtypes) == {torch.float32}  # autocast alone: the GEMMs are bf16, the stream is not
    assert cast_dtypes == [torch.bfloat16] * (len(cast.blocks) + 1)
    loss.backward()
    # the parameters, their gradients and so the optimizer stay fp32
    parameters = list(cast.parameters())
    assert {p.dtype for p in parameters} == {p.grad.dtype for p in parameters} == {torch.float32}
    assert all(torch.isfinite(p.grad).all() for p in parameters)


def test_compiled_graphs_counts_each_new_shape_that_recompiles() -> None:
    """The counter behind graphs_compiled in step and epoch records: one per graph dynamo builds, none for
    a call that reuses one (the eager backend compiles in milliseconds; the count is dynamo's, not the
    backend's)."""
    layer = torch.nn.Linear(8, 8)
    layer.compile(backend="eager", dynamic=None)
    before = parallel.compiled_graphs()
    layer(torch.randn(4, 16, 8))
    assert parallel.compiled_graphs() == before + 1
    layer(torch.randn(4, 16, 8))  # same shape: reused
    assert parallel.compiled_graphs() == before + 1
    layer(torch.randn(4, 24, 8))  # a new length: recompiled with a symbolic length ...
    layer(torch.randn(4, 40, 8))  # ... which serves the next one
    assert parallel.compiled_graphs() == before + 2


def test_whole_model_compile_turns_the_length_symbolic_for_bucketed_batches_only() -> None:
    """With dynamic padding a static graph per bucket length would cost ~50 s each for the large model on
    the H200; fixed-length batches keep one static graph (the eager backend: dynamo's count, in ms)."""
    bucketed = get_recipe("optimized")
    assert bucketed.padding == "dynamic" and bucketed.bucketing
    fixed = dataclasses.replace(bucketed, padding="max", bucketing=False)
    for config, graphs_for_three_lengths in ((bucketed, 2), (fixed, 3)):
        model = parallel.compile_model(torch.nn.Linear(8, 8), config, backend="eager")
        before = parallel.compiled_graphs()
        for length in (16, 24, 40):
            model(torch.randn(4, length, 8))
        assert parallel.compiled_graphs() - before == graphs_for_three_lengths, config.padding


def test_compile_kwargs_pass_a_mode_or_its_options_with_the_cpp_wrapper() -> None:
    optimized = get_recipe("optimized")
    assert parallel.compile_kwargs(optimized) == {"mode": None}
    with_cpp = dataclasses.replace(optimized, compile_cpp_wrapper=True)
    assert parallel.compile_kwargs(with_cpp) == {"options": {"cpp_wrapper": True}}
    tuned = dataclasses.replace(with_cpp, compile_mode="max-autotune-no-cudagraphs")
    options = parallel.compile_kwargs(tuned)["options"]
    assert options["cpp_wrapper"] is True and options["max_autotune"] is True  # the mode's own options kept


def test_the_cpp_wrapper_compiles_each_block_to_a_cpp_entry_that_matches_eager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real Inductor compile on the CPU (~15 s): the blocks' wrapper is generated C++ (a ``.main.cpp`` with
    Inductor's entry point in a fresh cache), and the model computes what the eager one does."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    cfg = preset("tiny", vocab_size=100, num_labels=2, max_len=32)
    torch.manual_seed(0)
    eager = Encoder(cfg).eval()
    torch.manual_seed(0)
    compiled = Encoder(cfg).eval()
    parallel.compile_blocks(compiled, dataclasses.replace(get_recipe("optimized"), compile_cpp_wrapper=True))
    ids, mask = torch.randint(4, 100, (4, 16)), torch.ones(4, 16, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids, mask), eager(ids, mask))
    wrappers = [p for p in tmp_path.rglob("*.main.cpp") if "inductor_entry" in p.read_text()]
    assert wrappers, "no C++ wrapper was generated"
