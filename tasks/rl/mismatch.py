"""Training–inference mismatch: how far the generator's behaviour logprobs are from the
trainer's own logprobs of the same tokens under the same weights.

vLLM computes with other kernels (and maybe another dtype) than the trainer, so even right
after a sync its logprobs differ; a large gap biases the PPO ratio. Measured per iteration,
before the update, on every response token: the mean and max |μ − π| and the k1 estimate
mean(μ − π) (OpenRLHF's `vllm_kl`). It needs one forward pass over the batch, shared with
the IS correction's π_old (`correction.proximal_logprobs`), so it runs only where the
engine is not the trainer's own computation (vLLM).
"""

from __future__ import annotations

import torch

from alignflow.tasks.steps.host_api import RLHost


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


def wanted(host: RLHost) -> bool:
    """Measured only where the engine is not the trainer's own computation (vLLM)."""
    return host.sampled_by == "vllm"


def measure(host: RLHost, exp, trainer: torch.Tensor | None) -> dict[str, float]:
    """The mismatch metrics of this batch (`trainer`: its log-probs under the weights before
    the update, computed once by the learn step) when the host generates with vLLM, else {}."""
    if not wanted(host) or trainer is None:
        return {}
    behaviour = exp.old_logp if exp.behaviour_logp is None else exp.behaviour_logp
    return mismatch_metrics(behaviour, trainer, exp.mask)
