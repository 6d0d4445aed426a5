"""ZeRO-3 trainers load partitioned (issue 21 §3.9): the hosts build the model inside
`deepspeed.zero.Init` (transformers' ZeRO-3 loading), so no rank ever holds the whole fp32
model — each rank's parameters are its shard as soon as `from_pretrained` returns — and it
trains as the model loaded whole does. Two ranks on the GPU group, NCCL's refusals applied."""

from __future__ import annotations

import pytest

from tests.fixtures.ranks import run_ranks

pytest.importorskip("deepspeed")
pytestmark = pytest.mark.slow


def _load(rank: int, world: int, port: int, model_dir: str, lora: bool) -> dict:
    import torch

    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.modeling.lora import LoraConfig
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer, load_trainer, trainable_lm
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from tests.distributed import dp_work
    from tests.fast.test_gpu_collectives import gpu_group

    gpu_group(rank, world, port)
    cfg = TrainerConfig(lr=1e-2, lr_warmup_ratio=0.0, total_steps=2)
    ds = DSConfig(zero_stage=3, lora=LoraConfig(rank=4) if lora else LoraConfig())
    loaded: dict = {}

    def load():
        model = trainable_lm(model_dir, ds)
        params = [p for p in model.parameters() if not lora or not p.requires_grad]
        loaded["partitioned"] = all(hasattr(p, "ds_id") for p in params)
        loaded["local"] = sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel()
                              for p in params)
        loaded["full"] = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel()
                             for p in params)
        return model
    sharded = load_trainer(load, cfg, ds)
    whole = build_trainer(trainable_lm(model_dir, ds) if lora else load_causal_lm(model_dir),
                          cfg, ds)
    for seed in range(2):
        a, b = dp_work.grpo_step(sharded, seed), dp_work.grpo_step(whole, seed)
        loaded.setdefault("norms", []).append((a["grad_norm"], b["grad_norm"]))
    same = all(torch.equal(x, y) for (_, x), (_, y) in zip(
        sharded.state_dict_for_sync(), whole.state_dict_for_sync(), strict=True))
    return {**loaded, "same": same}


@pytest.mark.parametrize("lora", [False, True])
def test_a_zero3_model_is_partitioned_as_it_loads_and_trains_as_one_loaded_whole(
        tiny_model_dir, lora):
    results = run_ranks(_load, 2, str(tiny_model_dir), lora)
    assert all(isinstance(r, dict) for r in results), results
    for r in results:
        assert r["partitioned"] and r["local"] <= r["full"] / 2 + 64, r
        assert r["same"], r
        assert all(a == b for a, b in r["norms"]), r["norms"]


def _stream(rank: int, world: int, port: int, model_dir: str, lora: bool) -> dict:
    import gc
    import weakref

    from alignflow.tasks.modeling.lora import LoraConfig
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import load_trainer, trainable_lm
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from tests.fast.test_gpu_collectives import gpu_group

    gpu_group(rank, world, port)
    ds = DSConfig(zero_stage=3, lora=LoraConfig(rank=4) if lora else LoraConfig())
    trainer = load_trainer(lambda: trainable_lm(model_dir, ds), TrainerConfig(total_steps=1), ds)
    if rank:
        trainer.take_part_in_sync()
        return {}
    refs, most = [], 0
    for _name, tensor in trainer.state_dict_for_sync():
        refs.append(weakref.ref(tensor))
        del tensor
        gc.collect()
        most = max(most, sum(r() is not None for r in refs))
    tied = trainer.model.config.tie_word_embeddings if not lora else \
        trainer.model.get_base_model().config.tie_word_embeddings
    return {"most_alive": most, "tensors": len(refs), "tied": int(tied)}


@pytest.mark.parametrize("lora", [False, True])
def test_a_zero3_sync_streams_one_gathered_parameter_at_a_time(tiny_model_dir, lora):
    lead, _ = run_ranks(_stream, 2, str(tiny_model_dir), lora)
    assert isinstance(lead, dict), lead
    assert lead["tensors"] > 10 and lead["most_alive"] <= 1 + lead["tied"], lead
