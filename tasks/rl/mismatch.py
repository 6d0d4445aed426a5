"""Training–inference mismatch: how far the generator's behaviour logprobs are from the
trainer's own logprobs of the same tokens under the same weights.

vLLM computes with other kernels (and maybe another dtype) than the trainer, so even right
after a sync its logprobs differ; a large gap biases the PPO ratio. Measured per iteration,
before the update, on every response token: the mean and max |μ − π| and the k1 estimate
mean(μ − π) (OpenRLHF's `vllm_kl`). One extra forward pass over the batch, so it runs only
where the engine is not the trainer's own computation (vLLM).
"""

from __future__ import annotations

import torch

from alignflow.tasks.modeling.batching import chunks
from alignflow.tasks.modeling.forward import response_logprobs


@torch.no_grad()
def trainer_logprobs(model, prompts: list[list[int]], responses: list[list[int]], *,
                     micro_batch: int, packed: bool, pad_id: int,
                     temperature: float) -> torch.Tensor:
    """(B, R) float32 CPU log-probs of every response token under `model` as it stands."""
    width = max(len(r) for r in responses)
    out = torch.zeros(len(responses), width, dtype=torch.float32)
    was_training = model.training
    model.eval()
    try:
        for idx in chunks(len(responses), micro_batch):
            lp, _ = response_logprobs(model, [prompts[i] for i in idx],
                                      [responses[i] for i in idx], packed=packed,
                                      pad_id=pad_id, temperature=temperature)
            out[idx.start:idx.stop, : lp.shape[1]] = lp.float().cpu()
    finally:
        model.train(was_training)
    return out


def mismatch_metrics(behaviour: torch.Tensor, trainer: torch.Tensor,
                     mask: torch.Tensor) -> dict[str, float]:
    """Mean / max |behaviour − trainer| and mean(behaviour − trainer) over masked tokens."""
    keep = mask.bool()
    diff = (behaviour - trainer)[keep]
    if diff.numel() == 0:
        return {}
    return {"mismatch/logprob_abs_mean": float(diff.abs().mean()),
            "mismatch/logprob_abs_max": float(diff.abs().max()),
            "mismatch/k1": float(diff.mean())}


def measure(host, exp, settings) -> dict[str, float]:
    """The mismatch metrics of this batch when the host generates with vLLM, else {}."""
    if getattr(host, "engine_kind", "hf") != "vllm":
        return {}
    lp = trainer_logprobs(host.actor.model, exp.prompts, exp.responses,
                          micro_batch=settings.train.micro_batch_size,
                          packed=settings.packing, pad_id=host.tokenizer.pad_token_id,
                          temperature=settings.temperature)
    return mismatch_metrics(exp.old_logp, lp, exp.mask)
