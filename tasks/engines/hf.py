"""Generation with a Hugging Face causal LM on CPU (or one GPU): the default engine.

A hand-rolled decode loop over transformers' KV cache rather than `model.generate`: it gives
the exact behaviour logprob of each sampled token for free, and per-row uniform streams make the
samples of a (prompt, sample) pair independent of the micro-batch it lands in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from alignflow.artifacts.scope import beat
from alignflow.artifacts.tensors import pad_left as left_pad
from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.engines.base import UNKNOWN_VERSION, GeneratedSample, SamplingParams, WakeTag
from alignflow.tasks.engines.sampling import RowStreams, StopChecker, sample_tokens


@dataclass
class _Row:
    prompt_index: int
    sample_index: int
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None


class HFEngine:
    """Batched, left-padded sampling with a KV cache; see `engines.base` for the contract."""

    def __init__(self, model, tokenizer, *, micro_rollout_batch_size: int = 8,
                 policy_version: int = 0) -> None:
        if micro_rollout_batch_size < 1:
            raise ConfigError(
                f"micro_rollout_batch_size={micro_rollout_batch_size}: expected an integer >= 1"
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.micro_rollout_batch_size = micro_rollout_batch_size
        self.policy_version = policy_version
        self.produced = 0  # tokens sampled + sequences finished, ever (`progress`)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad if pad is not None else 0)

    @classmethod
    def from_pretrained(cls, path: str, **kwargs) -> HFEngine:
        from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer

        return cls(load_causal_lm(path), load_tokenizer(path), **kwargs)

    def generate(self, prompts: list[list[int]], params: SamplingParams, *,
                 prompt_offset: int = 0) -> list[GeneratedSample]:
        """`params.n` samples per prompt, ordered by (prompt_index, sample_index).
        `prompt_offset`: index of `prompts[0]` in the whole batch, when engines share one
        (indices and sample streams are those of the whole batch)."""
        if any(len(p) == 0 for p in prompts):
            raise ConfigError("generate: every prompt needs at least one token; got an empty one")
        if self.policy_version == UNKNOWN_VERSION:
            raise EngineError("generate: a weight sync stopped halfway and left this engine's "
                              "weights no version's; sync it again before it samples")
        seed = params.seed
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        rows = [_Row(prompt_offset + i, s, list(p)) for i, p in enumerate(prompts)
                for s in range(params.n)]
        step = self.micro_rollout_batch_size
        for start in range(0, len(rows), step):  # a beat per decode step: `_beat_tokens`
            self._decode(rows[start : start + step], params, seed,
                         lambda: _beat_tokens(rows, params.max_new_tokens))
        return [self._sample(r) for r in rows]

    def _sample(self, row: _Row) -> GeneratedSample:
        return GeneratedSample(
            prompt_index=row.prompt_index, sample_index=row.sample_index,
            prompt_ids=row.prompt_ids, response_ids=row.response_ids,
            behaviour_logprobs=row.logprobs, finish_reason=row.finish_reason or "length",
            policy_version=self.policy_version,
        )

    @torch.inference_mode()
    def _decode(self, rows: list[_Row], params: SamplingParams, seed: int,
                on_step: Callable[[], None] = lambda: None) -> None:
        """Fills each row's response in place: prefill once, then one token per step
        (`on_step` after each)."""
        device = next(self.model.parameters()).device
        ids, mask = (t.to(device) for t in left_pad([r.prompt_ids for r in rows], self.pad_token_id))
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        streams = RowStreams(seed, [(r.prompt_index, r.sample_index) for r in rows])
        eos = set(params.eos_token_ids or self._default_eos())
        stops = StopChecker(self.tokenizer, params.stop)
        cache = DynamicCache(config=self.model.config)
        for _ in range(params.max_new_tokens):
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                             past_key_values=cache, use_cache=True, logits_to_keep=1)
            tokens, logps = sample_tokens(out.logits[:, -1, :], params, streams)
            for row, tok, lp in zip(rows, tokens.tolist(), logps.tolist(), strict=True):
                if row.finish_reason is None:
                    row.response_ids.append(tok)
                    row.logprobs.append(lp)
                    self.produced += 1
                    if tok in eos or stops.hit(row.response_ids):
                        row.finish_reason = "stop"
                        self.produced += 1
            on_step()
            if all(r.finish_reason is not None for r in rows):
                return
            ids = tokens[:, None]
            mask = torch.cat([mask, mask.new_ones(len(rows), 1)], dim=-1)
            positions = positions[:, -1:] + 1

    def _default_eos(self) -> tuple[int, ...]:
        eos = self.tokenizer.eos_token_id
        return () if eos is None else (int(eos),)

    def progress(self) -> int:
        """Tokens sampled and sequences finished since the engine was built: a count that
        grows while generate makes progress (read from another thread while it runs)."""
        return self.produced

    def sleep(self) -> bool:
        """No sleep mode: the model stays where it is (see `engines.base`)."""
        return False

    def wake(self, tags: tuple[WakeTag, ...] | None = None) -> bool:
        return False

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], *,
                       version: int | None = None) -> None:
        """Copies tensors into the model's parameters and buffers by name, in place. One
        that fails halfway leaves a model that is no version's: `UNKNOWN_VERSION`, so the
        caller syncs it again before it samples."""
        before = self.policy_version
        try:
            self.load_tensors(named_tensors)
        except BaseException:
            self.policy_version = UNKNOWN_VERSION
            raise
        self.policy_version = before + 1 if version is None else version

    @torch.no_grad()
    def load_tensors(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copies tensors into the model by name, in place; the version is the caller's."""
        own = self.model.state_dict()
        for name, tensor in named_tensors:
            if name not in own:
                raise ConfigError(f"update_weights: unknown tensor {name!r}; expected a name "
                                  f"of {type(self.model).__name__}.state_dict()")
            if own[name].shape != tensor.shape:
                raise ConfigError(f"update_weights: {name!r} has shape {tuple(tensor.shape)}; "
                                  f"expected {tuple(own[name].shape)}")
            own[name].copy_(tensor)

    def load_checkpoint(self, store, rel_dir: str, *, version: int | None = None) -> None:
        """Loads model weights from a checkpoint committed with `artifacts.checkpoints.save`."""
        from alignflow.artifacts import checkpoints

        ckpt = checkpoints.load(store, rel_dir)
        self.update_weights(ckpt.model_state.items(), version=version)


def _beat_tokens(rows: list[_Row], max_new_tokens: int) -> None:
    """How far a generate is within its token budget (a finished sequence spends all of its
    share), for the driver's heartbeat (`flows/control/heartbeat.py`): one micro-batch shows
    progress too, not 0/16 sequences until it ends."""
    ended = [r.finish_reason is not None or len(r.response_ids) >= max_new_tokens for r in rows]
    finished = sum(ended)
    spent = sum(max_new_tokens if e else len(r.response_ids) for r, e in zip(rows, ended,
                                                                            strict=True))
    beat(spent, len(rows) * max_new_tokens, f"tokens ({finished}/{len(rows)} sequences)")
