"""The plain PyTorch floor of `bench/peers.py`: the same DPO, SFT and GRPO work as the
other sides in the fewest lines a person would write (pre-tokenised, padded per batch,
AdamW, grad clip 1.0, fp32). Each function returns the loop's seconds (the work after
the model and data are loaded)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer

from bench.peer_setup import Work, reward


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _load(model_dir: Path):
    tok = AutoTokenizer.from_pretrained(model_dir)
    return tok, AutoModelForCausalLM.from_pretrained(model_dir).train()


def _ids(tok, texts: list[str]) -> list[list[int]]:
    return tok(texts, add_special_tokens=False)["input_ids"]


def _batch(prompts: list[list[int]], responses: list[list[int]], pad: int):
    """Right-padded [prompt | response] rows and a mask of the response tokens (labels)."""
    seqs = [p + r for p, r in zip(prompts, responses, strict=True)]
    width = max(map(len, seqs))
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    loss_mask = torch.tensor([[0] * len(p) + [1] * len(r) + [0] * (width - len(p) - len(r))
                              for p, r in zip(prompts, responses, strict=True)])
    return ids, attn, loss_mask


def _token_logp(model, ids, attn) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    return torch.gather(logits.log_softmax(-1), 2, ids[:, 1:, None]).squeeze(-1)


def _fit(p: list[int], c: list[int], max_len: int) -> tuple[list[int], list[int]]:
    return p, c[: max(0, max_len - len(p))]


def _step(model, opt, loss) -> None:
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def dpo(model_dir: Path, data: Path, work: Work) -> float:
    tok, policy = _load(model_dir)
    ref = AutoModelForCausalLM.from_pretrained(model_dir).eval().requires_grad_(False)
    rows, eos = _rows(data), [tok.eos_token_id]
    prompts = _ids(tok, [r["prompt"] for r in rows])
    chosen = [c + eos for c in _ids(tok, [r["chosen"] for r in rows])]
    rejected = [c + eos for c in _ids(tok, [r["rejected"] for r in rows])]
    start = time.perf_counter()
    opt = torch.optim.AdamW(policy.parameters(), lr=work.lr)
    for s in range(len(rows) // work.batch):
        idx = range(s * work.batch, (s + 1) * work.batch)
        pairs = [_fit(prompts[i], chosen[i], work.max_len) for i in idx] + \
            [_fit(prompts[i], rejected[i], work.max_len) for i in idx]
        ids, attn, mask = _batch([p for p, _ in pairs], [r for _, r in pairs], tok.pad_token_id)
        pi = (_token_logp(policy, ids, attn) * mask[:, 1:]).sum(-1)
        with torch.no_grad():
            rf = (_token_logp(ref, ids, attn) * mask[:, 1:]).sum(-1)
        n = work.batch
        margin = (pi[:n] - rf[:n]) - (pi[n:] - rf[n:])
        _step(policy, opt, -F.logsigmoid(work.beta * margin).mean())
    return time.perf_counter() - start


def sft(model_dir: Path, data: Path, work: Work) -> float:
    tok, model = _load(model_dir)
    rows, eos = _rows(data), [tok.eos_token_id]
    prompts = _ids(tok, [r["input"] for r in rows])
    outputs = [o + eos for o in _ids(tok, [r["output"] for r in rows])]
    start = time.perf_counter()
    opt = torch.optim.AdamW(model.parameters(), lr=work.lr)
    for s in range(len(rows) // work.batch):
        idx = range(s * work.batch, (s + 1) * work.batch)
        pairs = [_fit(prompts[i], outputs[i], work.max_len) for i in idx]
        ids, attn, mask = _batch([p for p, _ in pairs], [r for _, r in pairs], tok.pad_token_id)
        logp, m = _token_logp(model, ids, attn), mask[:, 1:].float()
        _step(model, opt, -(logp * m).sum() / m.sum())
    return time.perf_counter() - start


def _rollouts(model, tok, prompts: list[list[int]], work: Work):
    """Sampled responses (EOS kept, padding dropped) and their behaviour log-probs."""
    rows = [p for p in prompts for _ in range(work.samples)]
    width = max(map(len, rows))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in rows])
    attn = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in rows])[:, None])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=attn.long(), do_sample=True, top_k=0,
                             top_p=1.0, temperature=1.0, max_new_tokens=work.new_tokens,
                             pad_token_id=tok.pad_token_id, output_scores=True,
                             return_dict_in_generate=True)
    new = out.sequences[:, width:]
    logps = torch.stack([s.float().log_softmax(-1) for s in out.scores], 1)
    logps = logps.gather(2, new[:, :, None]).squeeze(-1)
    responses, old = [], []
    for row, lp in zip(new.tolist(), logps, strict=True):
        n = row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
        responses.append(row[:n])
        old.append(lp[:n])
    return rows, responses, old


def grpo(model_dir: Path, data: Path, work: Work) -> float:
    """One iteration: sample, reward, group-normalised advantages, PPO-clip (μ = 1) over
    `rl_batch`-sample minibatches of `rl_micro`-sample micro-batches, token-mean loss."""
    tok, model = _load(model_dir)
    prompts = _ids(tok, [r["prompt"] for r in _rows(data)])
    start = time.perf_counter()
    opt = torch.optim.AdamW(model.parameters(), lr=work.lr)
    rows, responses, old = _rollouts(model, tok, prompts, work)
    rewards = torch.tensor([reward(t) for t in tok.batch_decode(responses,
                                                                  skip_special_tokens=True)])
    groups = rewards.view(-1, work.samples)
    adv = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4))
    adv = adv.flatten()
    for m in range(len(rows) // work.rl_batch):
        mb = list(range(m * work.rl_batch, (m + 1) * work.rl_batch))
        tokens = sum(len(responses[i]) for i in mb)
        for k in range(0, len(mb), work.rl_micro):
            idx = mb[k : k + work.rl_micro]
            ids, attn, mask = _batch([rows[i] for i in idx], [responses[i] for i in idx],
                                     tok.pad_token_id)
            logp = _token_logp(model, ids, attn)
            lmask = mask[:, 1:].bool()
            old_lp = torch.zeros_like(logp)
            old_lp[lmask] = torch.cat([old[i] for i in idx])
            ratio = (logp - old_lp).exp()
            a = adv[idx][:, None]
            loss = -torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)
            (loss * lmask).sum().div(tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - start
