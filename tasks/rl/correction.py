"""Off-policy correction in the learn step (OpenRLHF 0.11's `algo.advantage.is_correction_*`).

Off: the PPO ratio is taken against the behaviour log-probs the generator recorded — the
importance ratio of the sampling policy itself, exact when generation is on-policy.
On: the learner first recomputes the log-probs of the batch under its own weights before
the update (the proximal policy π_old); the PPO ratio is taken against those, and each
token's loss is weighted by the truncated ratio π_old / μ to the behaviour policy μ
(`tasks/losses/is_correction.py`). That separates staleness (a generator several versions
behind, or an inference engine that computes differently) from the trust region.
"""

from __future__ import annotations

import torch

from alignflow.tasks.modeling.batching import inference_chunks
from alignflow.tasks.modeling.forward import response_logprobs


@torch.no_grad()
def proximal_logprobs(model, prompts: list[list[int]], responses: list[list[int]], *,
                      micro_batch: int, packed: bool, pad_id: int, temperature: float,
                      max_tokens: int | None = None) -> torch.Tensor:
    """(B, R) log-probs of every response token under `model` as it stands (π_old), in
    micro-batches of `micro_batch` samples or of `max_tokens` tokens (`inference_chunks`)."""
    width = max(len(r) for r in responses)
    out = torch.zeros(len(responses), width, dtype=torch.float32)
    was_training = model.training
    model.eval()
    try:
        for idx in inference_chunks(prompts, responses, micro_batch, max_tokens):
            lp, _ = response_logprobs(model, [prompts[i] for i in idx],
                                      [responses[i] for i in idx], packed=packed,
                                      pad_id=pad_id, temperature=temperature)
            out[idx, : lp.shape[1]] = lp.float()
    finally:
        model.train(was_training)
    return out
