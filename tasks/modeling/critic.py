"""The PPO critic: a transformer backbone with a linear value head, one value per token.

Stored as a sequence-classification model (`num_labels=1`, head `score`), so it initialises
from a reward-model checkpoint as is (OpenRLHF: "critic initialised from the reward model"),
or from a causal LM with a fresh head; its saved folders load back the same way. With
`reward.normalize_enable` its values are (v − mean)/std with the mean/std of its own
config.json (a reward model's; none: 0 and 1), as OpenRLHF's critic computes them.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModelForSequenceClassification

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.device import to_model
from alignflow.tasks.modeling.loading import DTYPES, Dtype


def norm_stats(config) -> tuple[float, float]:
    """(mean, std) a trained reward model keeps in its config.json (OpenRLHF's train_rm
    writes them); (0, 1) when it has none, as OpenRLHF reads it: nothing to normalise by."""
    stats = config.to_dict()
    mean, std = stats.get("mean"), stats.get("std")
    if mean is None:
        return 0.0, 1.0
    if std is None or not float(std) > 0:
        raise ConfigError(f"model config has mean={mean} but std={std}; expected a std > 0 "
                          "beside its mean (reward.normalize_enable divides by it)")
    return float(mean), float(std)


class Critic(nn.Module):
    """Wraps `*ForSequenceClassification`; applies its `score` head to every hidden state."""

    def __init__(self, model, *, normalize: bool = False) -> None:
        super().__init__()
        head = getattr(model, "score", None)
        if not isinstance(head, nn.Linear) or head.out_features != 1:
            raise ConfigError(f"Critic: {type(model).__name__} has no `score` Linear head with "
                              "one output; expected a sequence classifier with num_labels=1")
        self.model = model
        self.mean, self.std = norm_stats(model.config) if normalize else (0.0, 1.0)

    @classmethod
    def from_pretrained(cls, path: str, *, dtype: Dtype = "fp32",
                        normalize: bool = False) -> Critic:
        """From a reward model (head kept) or a causal LM (head newly initialised)."""
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, dtype=DTYPES[dtype], local_files_only=True)
        if model.config.pad_token_id is None:
            model.config.pad_token_id = model.config.eos_token_id
        return cls(model, normalize=normalize)

    def token_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) value of every prefix; the last real token's value is the RM's score."""
        input_ids, attention_mask = to_model(self.model, input_ids, attention_mask)
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        hidden = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                       position_ids=positions, use_cache=False).last_hidden_state
        values = self.model.score(hidden).squeeze(-1).float()
        return values if (self.mean, self.std) == (0.0, 1.0) else (values - self.mean) / self.std

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                num_actions: int) -> torch.Tensor:
        """(B, num_actions): value of the state before each response token (as logprobs)."""
        return self.token_values(input_ids, attention_mask)[:, :-1][:, -num_actions:]

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None
                                      ) -> None:
        """Activation checkpointing of the backbone, as the trainers ask any model for it
        (transformers 5 renamed the method; the old name warns there)."""
        inner = self.model
        if hasattr(inner, "activation_checkpointing_enable"):
            inner.activation_checkpointing_enable(
                activation_checkpointing_kwargs=gradient_checkpointing_kwargs)
        else:
            inner.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)

    def save_pretrained(self, folder: str, **kwargs) -> None:
        self.model.save_pretrained(folder, **kwargs)
