"""The pretraining-mix (ptx) term of InstructGPT: L = L_RL + ptx_coef · CE(pretraining text).

Each optimizer step of the actor also fits `batch_size` texts of the pretraining data set,
taken in order by the trainer's step count, so a resumed run sees the same texts.
"""

from __future__ import annotations

from torch import Tensor

from alignflow.artifacts.tensors import pad_right
from alignflow.tasks.data.loading import mix_datasets
from alignflow.tasks.data.prompts import require_keys
from alignflow.tasks.losses.tokens import IGNORE_INDEX, ptx_loss
from alignflow.tasks.modeling.device import to_model
from alignflow.tasks.rl.learn_config import PtxConfig
from alignflow.tasks.steps.host_api import Trained


def load_pretrain_ids(cfg: PtxConfig, tokenizer) -> list[list[int]]:
    """Token ids of the pretraining texts (truncated to `max_len`), in data-set order."""
    ds = mix_datasets(cfg.pretrain_data, max_samples=cfg.max_samples)
    require_keys(ds, cfg.pretrain_key)
    texts = list(ds[cfg.pretrain_key])
    return [ids[: cfg.max_len] for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]
            if ids]


def pretrain_ids(host: Trained, cfg: PtxConfig) -> list[list[int]]:
    """The host's tokenised pretraining texts for `cfg`, loaded once per host."""
    return host.memo(("ptx", cfg), lambda: load_pretrain_ids(cfg, host.tokenizer))


def ptx_batch(ids: list[list[int]], step: int, batch_size: int) -> list[list[int]]:
    start = step * batch_size
    return [ids[(start + i) % len(ids)] for i in range(batch_size)]


def ptx_term(model, seqs: list[list[int]], pad_id: int) -> Tensor:
    """Token-mean CE of the next token over `seqs` (padding ignored)."""
    ids, mask = to_model(model, *pad_right(seqs, pad_id))
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)[:, 1:]
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, :-1]
    return ptx_loss(logits.float(), labels.contiguous())


def with_ptx(loss: Tensor, model, batch: dict, coef: float, pad_id: int) -> Tensor:
    """Adds the ptx term when this micro-batch carries one (the first of each step)."""
    seqs = batch.get("ptx")
    if not seqs:
        return loss
    return loss + coef * ptx_term(model, seqs, pad_id)

