"""Data-parallel work for the equivalence tests: one GRPO-style and one DPO learn step per
call, on `rank`'s shard of a fixed batch, with global normalisers. Run by Ray actors and
torchrun ranks alike; a world of one runs the whole batch."""

from __future__ import annotations

import torch

from alignflow.tasks.advantages.estimators import group_normalize
from alignflow.tasks.distributed import reduce, sharding
from alignflow.tasks.losses.aggregate import Normaliser
from alignflow.tasks.losses.policy import policy_loss
from alignflow.tasks.losses.preference import dpo_loss
from alignflow.tasks.modeling.logprobs import sequence_logprobs

ROWS, PROMPT, RESPONSE, GROUP, MICRO = 8, 6, 8, 4, 2


def grpo_batch(seed: int) -> dict[str, torch.Tensor]:
    """8 rows = 2 prompts × 4 samples; responses of 3..8 tokens (right padding masked)."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(4, 512, (ROWS // GROUP, PROMPT), generator=g).repeat_interleave(
        GROUP, 0)
    responses = torch.randint(4, 512, (ROWS, RESPONSE), generator=g)
    lengths = torch.randint(3, RESPONSE + 1, (ROWS,), generator=g)
    mask = (torch.arange(RESPONSE)[None] < lengths[:, None]).float()
    reward = torch.rand(ROWS, generator=g)
    return {"input_ids": torch.cat([prompts, responses], 1), "mask": mask, "reward": reward}


def dpo_batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(4, 512, (ROWS, PROMPT), generator=g)
    chosen, rejected = (torch.randint(4, 512, (ROWS, RESPONSE), generator=g) for _ in range(2))
    return {"chosen": torch.cat([prompt, chosen], 1), "rejected": torch.cat([prompt, rejected], 1)}


def _logp(model, ids: torch.Tensor) -> torch.Tensor:
    return sequence_logprobs(model, ids, torch.ones_like(ids), RESPONSE)


def _local(batch: dict[str, torch.Tensor], group_size: int) -> dict[str, torch.Tensor]:
    rank, world = reduce.rank_and_size()
    rows = sharding.shard_range(ROWS, rank, world, group_size=group_size)
    return {k: v[rows.start:rows.stop] for k, v in batch.items()}


def _micro(n: int) -> list[dict[str, list[int]]]:
    return [{"idx": list(range(i, min(i + MICRO, n)))} for i in range(0, n, MICRO)]


def grpo_step(trainer, seed: int) -> dict[str, float]:
    """Group-normalised advantages (groups stay on one rank), token-mean PPO-clip loss over
    the *global* token count (the trainer sums gradients over ranks)."""
    data = _local(grpo_batch(seed), GROUP)
    adv = group_normalize(data["reward"], GROUP)[:, None].expand_as(data["mask"])
    with torch.no_grad():
        old = _logp(trainer.engine, data["input_ids"])
    num_tokens = reduce.global_count(data["mask"])

    def loss_fn(model, batch):
        i = batch["idx"]
        loss, _ = policy_loss(_logp(model, data["input_ids"][i]), old[i], adv[i],
                              data["mask"][i], agg="token-mean",
                              norm=Normaliser(num_tokens=num_tokens))
        return loss, {}

    micro = _micro(len(data["reward"]))
    return trainer.step(micro, loss_fn, weights=[1.0] * len(micro))


def dpo_step(trainer, seed: int, ref: dict[str, torch.Tensor]) -> dict[str, float]:
    """Sigmoid DPO on summed response logprobs, mean over the global number of pairs."""
    data = _local(dpo_batch(seed) | ref, 1)
    pairs = reduce.global_sum(len(data["chosen"]))

    def loss_fn(model, batch):
        i = batch["idx"]
        pi = _logp(model, torch.cat([data["chosen"][i], data["rejected"][i]])).sum(-1)
        out = dpo_loss(*pi.split(len(i)), data["ref_c"][i], data["ref_r"][i], beta=0.1)
        return out.loss.sum() / pairs, {}

    micro = _micro(len(data["chosen"]))
    return trainer.step(micro, loss_fn, weights=[1.0] * len(micro))


def dpo_reference(model, seed: int) -> dict[str, torch.Tensor]:
    """Reference logprobs of the whole batch under the initial model (every rank alike)."""
    data = dpo_batch(seed)
    with torch.no_grad():
        return {"ref_c": _logp(model, data["chosen"]).sum(-1),
                "ref_r": _logp(model, data["rejected"]).sum(-1)}


def whitened_shard(seed: int) -> torch.Tensor:
    """`global_whiten` of this rank's rows of a fixed (ROWS, RESPONSE) tensor."""
    data = _local(grpo_batch(seed), GROUP)
    return reduce.global_whiten(data["reward"][:, None] * data["mask"] + data["mask"],
                                data["mask"])
