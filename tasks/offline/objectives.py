"""The loss of one micro-batch for each offline objective (`objective.py` names them).

Each objective takes the model, the micro-batch's example positions and a context (data,
reference log-probs, teacher logits) and returns `Out(loss, per_example, metrics)`:
`loss` is already divided by the whole optimizer step's denominator (examples, or tokens
for token-level losses), so summing micro-batch losses (trainer weights 1) equals one big
batch; metrics are likewise shares of the step. `per_example` holds detached per-example
values (`loss`, scores, token counts) for the `preferences` / `sft_samples` tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from alignflow.tasks.losses.preference import chosen_nll, dpo_loss, kto_loss
from alignflow.tasks.losses.reward_model import prm_loss, reward_loss
from alignflow.tasks.losses.tokens import IGNORE_INDEX, kd_loss, token_logprobs
from alignflow.tasks.offline.batches import (
    kl_partner,
    kl_response,
    lm_batch,
    packed_lm_batch,
    pad_right,
    response_logps,
    shifted_logprobs,
)
from alignflow.tasks.offline.config import TrainSpec


@dataclass
class Context:
    """What objectives read besides the model: one split's examples and their extras."""

    examples: dict[str, list]
    pad_id: int
    spec: TrainSpec
    reference: dict[str, torch.Tensor] | None = None
    teacher: dict[int, torch.Tensor] = field(default_factory=dict)
    placeholder_id: int | None = None
    reward_token_ids: list[int] | None = None


class Out(NamedTuple):
    loss: torch.Tensor
    per_example: dict[str, list]
    metrics: dict[str, float]


def _tokens(ctx: Context, idx: list[int]) -> tuple[list, list]:
    ex = ctx.examples
    return [ex["input_ids"][i] for i in idx], [ex["loss_mask"][i] for i in idx]


def sft(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """Token CE on loss-mask tokens; `denom` = loss tokens of the whole step."""
    if ctx.spec is not None and ctx.spec.packing:
        return sft_packed(model, idx, ctx, denom)
    input_ids, attention, labels = lm_batch(*_tokens(ctx, idx), ctx.pad_id)
    logp, _ = shifted_logprobs(model, input_ids, attention, labels)
    mask = labels[:, 1:] != IGNORE_INDEX
    n_tok = mask.sum(-1)
    per = (-logp).sum(-1).detach() / n_tok.clamp(min=1)
    return Out((-logp).sum() / denom, {"loss": per.tolist(), "n_tokens": n_tok.tolist()}, {})


def sft_packed(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """`sft` on one packed row (no padding); equal to the padded loss up to float error."""
    ids, masks = _tokens(ctx, idx)
    input_ids, positions, labels = packed_lm_batch(ids, masks)
    logits = model(input_ids=input_ids, position_ids=positions, attention_mask=None,
                   use_cache=False).logits[:, :-1]
    nll = -token_logprobs(logits, labels[:, 1:])[0]
    bounds = torch.tensor([len(s) for s in ids]).cumsum(0).tolist()
    per, n_tok, start = [], [], 0
    for end in bounds:  # label positions of sample k: start .. end-2 in the shifted row
        n = int((labels[0, start + 1 : end] != IGNORE_INDEX).sum())
        per.append(float(nll[start : end - 1].sum().detach()) / max(n, 1))
        n_tok.append(n)
        start = end
    return Out(nll.sum() / denom, {"loss": per, "n_tokens": n_tok}, {})


def distill(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """(1−kd_coef)·CE + kd_coef·KL(teacher‖student) per loss token, teacher logits from the
    teacher host."""
    input_ids, attention, labels = lm_batch(*_tokens(ctx, idx), ctx.pad_id)
    logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits[:, :-1]
    total, per, n_tok = logits.new_zeros(()), [], []
    for row, i in enumerate(idx):
        teacher = ctx.teacher[i]
        width = teacher.shape[0]
        y = labels[row, 1 : width + 1]
        n = int((y != IGNORE_INDEX).sum())
        row_loss = kd_loss(logits[row, :width][None], teacher[None], y[None],
                           alpha=1.0 - ctx.spec.loss.kd_coef)
        total = total + row_loss * n
        per.append(float(row_loss.detach()))
        n_tok.append(n)
    return Out(total / denom, {"loss": per, "n_tokens": n_tok}, {})


def prm(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """CE over the reward tokens at step placeholders; per-example mean, step mean."""
    ids = [ctx.examples["input_ids"][i] for i in idx]
    labels = pad_right([ctx.examples["labels"][i] for i in idx], IGNORE_INDEX)
    input_ids = pad_right(ids, ctx.pad_id)
    attention = pad_right([[1] * len(s) for s in ids], 0)
    logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
    losses, accs = [], []
    for row in range(len(idx)):
        out = prm_loss(input_ids[row][None], logits[row][None], labels[row][None],
                       placeholder_id=ctx.placeholder_id, reward_token_ids=ctx.reward_token_ids)
        losses.append(out.loss)
        accs.append(float(out.accuracy))
    loss = torch.stack(losses)
    return Out(loss.sum() / denom, {"loss": loss.detach().tolist()},
               {"accuracy": sum(accs) / denom})


def _pairs(ctx: Context, idx: list[int]) -> tuple[list, list, list]:
    ex = ctx.examples
    return ([ex["input_ids"][i] for i in idx], [ex["chosen_ids"][i] for i in idx],
            [ex["rejected_ids"][i] for i in idx])


def _pair_out(loss_vec, chosen, rejected, denom: float, extra: dict | None = None) -> Out:
    acc = (chosen > rejected).double()
    metrics = {"accuracy": float(acc.sum()) / denom,
               "chosen_reward": float(chosen.sum()) / denom,
               "rejected_reward": float(rejected.sum()) / denom,
               "margin": float((chosen - rejected).sum()) / denom, **(extra or {})}
    per = {"loss": loss_vec.detach().tolist(), "chosen_score": chosen.tolist(),
           "rejected_score": rejected.tolist()}
    return Out(loss_vec.sum() / denom, per, metrics)


def rm(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """Pairwise loss on the value head's score at each sequence's last token."""
    prompts, chosen, rejected = _pairs(ctx, idx)
    seqs = [p + c for p, c in zip(prompts, chosen, strict=True)]
    seqs += [p + r for p, r in zip(prompts, rejected, strict=True)]
    ids, attention = pad_right(seqs, ctx.pad_id), pad_right([[1] * len(s) for s in seqs], 0)
    values = model.token_values(ids, attention)
    scores = values[torch.arange(len(seqs)), attention.sum(-1) - 1]
    r_c, r_r = scores.split(len(idx))
    cfg = ctx.spec.loss
    loss = reward_loss(r_c, r_r, name=cfg.loss_type, margin=_margins(ctx, idx, r_c))
    return _pair_out(loss, r_c.detach(), r_r.detach(), denom)


def _margins(ctx: Context, idx: list[int], like: torch.Tensor):
    """The RM loss's margin: the constant `margin`, plus each pair's own from the data
    (`margin_loss_enable`; a pair without one: 0). OpenRLHF's logexp loss reads none."""
    cfg = ctx.spec.loss
    if not cfg.margin_loss_enable or cfg.loss_type == "logexp":
        return cfg.margin
    rows = ctx.examples.get("margin") or [None] * len(ctx.examples["input_ids"])
    own = torch.tensor([rows[i] or 0.0 for i in idx], dtype=like.dtype, device=like.device)
    return own + (cfg.margin or 0.0)


def _ref(ctx: Context, key: str, idx: list[int]) -> torch.Tensor:
    return ctx.reference[key][idx]


def dpo(model, idx: list[int], ctx: Context, denom: float, nll: bool = True) -> Out:
    """DPO / IPO / cDPO on summed response log-probs against the cached reference, plus
    `nll_loss_coef` × the chosen responses' mean token NLL (OpenRLHF's, when > 1e-8)."""
    prompts, chosen, rejected = _pairs(ctx, idx)
    logps = response_logps(model, prompts * 2, chosen + rejected, ctx.pad_id)
    pi_c, pi_r = logps.split(len(idx))
    cfg = ctx.spec.loss
    variant = cfg.dpo_variant
    out = dpo_loss(pi_c, pi_r, _ref(ctx, "chosen", idx), _ref(ctx, "rejected", idx),
                   variant=variant, beta=cfg.beta,
                   label_smoothing=cfg.label_smoothing if variant == "cdpo" else 0.0)
    coef = cfg.nll_loss_coef if nll else 0.0
    if coef <= 1e-8:
        return _pair_out(out.loss, out.chosen_reward, out.rejected_reward, denom)
    nll = chosen_nll(pi_c, torch.tensor([len(c) for c in chosen], device=pi_c.device))
    return _pair_out(out.loss + coef * nll, out.chosen_reward, out.rejected_reward, denom,
                     {"nll_loss": float(nll.detach().sum()) / denom})


def dpo_eval(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """DPO's eval loss: the preference loss alone (OpenRLHF's evaluate leaves the NLL out)."""
    return dpo(model, idx, ctx, denom, nll=False)


def kto(model, idx: list[int], ctx: Context, denom: float) -> Out:
    """KTO: chosen responses are desirable, rejected ones undesirable; an example holds a
    pair, or one response (OpenRLHF's unpaired data). KL from fixed mismatched samples.
    An example's loss is the mean of its responses' losses."""
    prompts, chosen, rejected = _pairs(ctx, idx)
    partner = kl_partner(len(ctx.examples["position"]))
    kl_resp = [kl_response(ctx.examples, partner[i]) for i in idx]
    logps = response_logps(model, prompts * 3, chosen + rejected + kl_resp, ctx.pad_id)
    pi_c, pi_r, pi_kl = logps.split(len(idx))
    has_c = torch.tensor([len(c) > 0 for c in chosen])
    has_r = torch.tensor([len(r) > 0 for r in rejected])
    cfg = ctx.spec.loss
    out = kto_loss(pi_c[has_c], _ref(ctx, "chosen", idx)[has_c], pi_r[has_r],
                   _ref(ctx, "rejected", idx)[has_r], pi_kl, _ref(ctx, "kl", idx),
                   beta=cfg.beta, desirable_weight=cfg.desirable_loss_weight,
                   undesirable_weight=cfg.undesirable_loss_weight)
    n_c = int(has_c.sum())
    per = out.loss.new_zeros(len(idx)).index_put((has_c,), out.loss[:n_c], accumulate=True)
    per = per.index_put((has_r,), out.loss[n_c:], accumulate=True)
    count = (has_c.to(per.dtype) + has_r.to(per.dtype))
    rewards = [out.chosen_reward.new_zeros(len(idx)).index_put((mask, ), r)
               for mask, r in ((has_c, out.chosen_reward), (has_r, out.rejected_reward))]
    return _pair_out(per / count, *rewards, denom, {"kl": float(out.kl) * len(idx) / denom})


def step_denominator(token_level: bool, ctx: Context, idx: list[int]) -> float:
    """Loss tokens of the step for token-level objectives, else the number of examples."""
    if not token_level:
        return float(len(idx))
    masks = ctx.examples["loss_mask"]
    return float(max(sum(sum(masks[i][1:]) for i in idx), 1))
