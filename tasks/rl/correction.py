"""π_old, the policy the PPO ratio is taken against, and the off-policy correction
(OpenRLHF 0.11.2's `algo.advantage.is_correction_*`).

π_old is the trainer's own forward pass over the batch under its weights before the update,
as OpenRLHF's experience maker computes it (`action_log_probs`); the generator's behaviour
log-probs μ feed only the IS correction and the mismatch metrics. A vLLM engine (other
kernels, often bf16) or a stale generator would otherwise put its gap into the ratio, and
the clip would act on it before the first optimizer step.

One exception, an optimisation the run plan states (`flows/compat/notes.py`): an HF engine
on the CPU in fp32 whose batch was sampled with the trainer's current weights runs the
trainer's own forward code on the same weights (its KV-cached decode differs from one full
pass by float32 rounding only: at most 9.5e-7 in log p on the tiny model, 157 of 244 tokens
bitwise equal), so its behaviour log-probs stand for π_old and the extra pass is skipped
(`engine_is_trainer`). With IS correction on (`tasks/losses/is_correction.py`) each token's
loss is weighted by the ratio π_old / μ, gated as its `_level`, `_mode` and `_gating` say.
"""

from __future__ import annotations

import torch

from alignflow.tasks.modeling.batching import inference_chunks
from alignflow.tasks.modeling.forward import response_logprobs


def engine_is_trainer(engine: str, device: torch.device, dtype: torch.dtype,
                      versions: list[int] | None, current: int) -> bool:
    """Whether the engine's behaviour log-probs are the trainer's π_old: an HF engine (the
    trainer's own forward code), on the CPU in fp32 (no kernel or bf16 difference), on a
    batch sampled with the current weights (no stale sample); the HF stand-in for vLLM on a
    simulated cluster is the HF engine. Said before the run by `learn_config.pi_old_notes`."""
    from alignflow.tasks.engines.standin import stands_in

    fresh = versions is not None and all(v == current for v in versions)
    hf = engine == "hf" or (engine == "vllm" and stands_in())  # a simulated cluster's
    return hf and device.type == "cpu" and dtype == torch.float32 and fresh


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
