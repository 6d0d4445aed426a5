"""A Hugging Face sequence-classification reward model (`reward_pretrain`), num_labels=1.

The score of a text is the head's output at its last real token, found from the attention
mask, so it does not depend on padding side or on what else is in the micro-batch (HF's own
pooling looks for `pad_token_id` in the ids, which is wrong when pad == eos and a text ends
in eos). Decoder heads (`model.score`, per token) are read through a forward hook; other
models (e.g. BERT's CLS classifier) use their own pooled logits with right padding.
Optional normalisation uses `config.mean` / `config.std`, which OpenRLHF stores in a
trained RM's config (none there: mean 0, std 1, as OpenRLHF reads it). `offload()` / `reload()` park the weights in a safetensors temp file
so an RL flow can free an idle reward model's memory.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.critic import norm_stats
from alignflow.tasks.modeling.device import model_device, to_model
from alignflow.tasks.modeling.offload import offload as offload_module
from alignflow.tasks.modeling.offload import reload as reload_module
from alignflow.tasks.rewards.base import RewardOutput, check_batch


def last_token_index(attention_mask: Tensor) -> Tensor:
    """Index of each row's last 1 in the mask, for left or right padding: (B, T) → (B,)."""
    width = attention_mask.shape[1]
    return width - 1 - attention_mask.flip(1).long().argmax(dim=1)


class ModelRewardModel:
    """Scores query texts (prompt + response) with a sequence classifier, in micro-batches."""

    def __init__(self, path: str | Path, *, micro_batch: int = 8, max_length: int = 2048,
                 normalize: bool = False, dtype: torch.dtype = torch.float32) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if not Path(path).is_dir():
            raise ConfigError(f"reward model folder {path} not found; expected a Hugging Face "
                              f"model folder (config.json + weights)")
        self.path, self.micro_batch, self.max_length = Path(path), micro_batch, max_length
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, dtype=dtype).eval()
        self._fix_padding()
        self.mean, self.std = self._norm_stats(normalize)
        self._offload_file: str | None = None

    def _fix_padding(self) -> None:
        tok, cfg = self.tokenizer, self.model.config
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        if cfg.pad_token_id is None:  # HF pooling refuses batches > 1 without it
            cfg.pad_token_id = tok.pad_token_id
        if not isinstance(getattr(self.model, "score", None), nn.Module):
            tok.padding_side = "right"  # pooled heads (CLS) expect text at position 0

    def _norm_stats(self, normalize: bool) -> tuple[float, float]:
        if not normalize:
            return 0.0, 1.0
        try:  # the HF model's config.json, not a flow config
            return norm_stats(self.model.config)
        except ConfigError as exc:
            raise ConfigError(f"reward model {self.path}: {exc}") from None

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        if self._offload_file is not None:
            self.reload()
        step = max(1, self.micro_batch)
        raw = [self._score_texts(queries[i:i + step]) for i in range(0, len(queries), step)]
        raw_t = torch.cat(raw) if raw else torch.zeros(0)
        rewards = ((raw_t - self.mean) / self.std).to(torch.float32)
        return RewardOutput(rewards, {"raw": raw_t.to(torch.float32)})

    @torch.inference_mode()
    def _score_texts(self, texts: list[str]) -> Tensor:
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True,
                             max_length=self.max_length)
        ids, mask = to_model(self.model, enc["input_ids"], enc["attention_mask"])
        head = getattr(self.model, "score", None)
        if not isinstance(head, nn.Module):
            inputs = dict(zip(enc.keys(), to_model(self.model, *enc.values()), strict=True))
            return self.model(**inputs).logits[:, 0].float().cpu()
        captured: list[Tensor] = []
        hook = head.register_forward_hook(lambda _m, _i, out: captured.append(out))
        try:
            position_ids = (mask.long().cumsum(-1) - 1).clamp(min=0)
            self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids)
        finally:
            hook.remove()
        per_token = captured[0][..., 0]  # (B, T)
        rows = torch.arange(len(texts), device=mask.device)
        return per_token[rows, last_token_index(mask)].float().cpu()

    @property
    def offloaded(self) -> bool:
        return self._offload_file is not None

    def offload(self) -> None:
        """Write parameters and buffers to a safetensors temp file and drop them (meta)."""
        if self._offload_file is None:
            self._device = model_device(self.model)
            self._offload_file = offload_module(self.model, prefix="alignflow-rm-")

    def reload(self) -> None:
        """Bring the weights back from the temp file (bitwise the same) and delete it."""
        if self._offload_file is not None:
            reload_module(self.model, self._offload_file, getattr(self, "_device", "cpu"))
            self._offload_file = None
