"""The generation-engine contract: what every engine (HF, vLLM, the simulated-cluster
stand-in) takes and returns.

Behaviour logprobs are defined once, here, so the learner can recompute them exactly:
for each sampled response token `y_t`, `log softmax(logits_t / temperature)[y_t]` in float32 —
the temperature-scaled distribution *before* top-k / top-p truncation. The learner gets the
same number from `sequence_logprobs(..., temperature=T)`, so PPO ratios compare like with like.
(vLLM returns raw-model logprobs by default; its engine must rescale to this definition.)

Responses keep the token that ended them: the EOS token (finish "stop"), or the token whose
text completed a stop string (finish "stop"; the text after the stop string within that
token is not cut, so ids and logprobs stay aligned). "length" means `max_new_tokens` ran out.

Engines that free memory between phases (vLLM's sleep mode) follow one order: `sleep()`
frees weights and KV cache; a weight sync wakes the weights alone (`wake(("weights",))`) and
loads into them while the KV cache stays freed; generate wakes the rest (`wake()`). Engines
without a sleep mode answer False to both. `progress()` counts the tokens an engine has
sampled and the sequences it finished, so a caller can tell a long generate from a hung one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from alignflow.errors import ConfigError

if TYPE_CHECKING:
    import torch

FinishReason = Literal["stop", "length"]
WakeTag = Literal["weights", "kv_cache"]  # what sleep frees, in the order it is woken
WAKE_TAGS: tuple[WakeTag, ...] = ("weights", "kv_cache")
UNKNOWN_VERSION = -1  # what an engine serves when its weights are no version's: a sync
# stopped halfway, or a restart lost them; it generates nothing until a whole sync


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """How to sample. `top_k=0` and `top_p=1.0` switch those filters off; `temperature=0` is greedy."""

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    n: int = 1
    stop: tuple[str, ...] = ()
    eos_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.max_new_tokens >= 1, "max_new_tokens", "an integer >= 1"),
            (self.temperature >= 0.0, "temperature", "a float >= 0"),
            (0.0 < self.top_p <= 1.0, "top_p", "a float in (0, 1]"),
            (self.top_k >= 0, "top_k", "an integer >= 0 (0 = off)"),
            (self.n >= 1, "n", "an integer >= 1"),
            (all(isinstance(s, str) and s for s in self.stop), "stop", "non-empty strings"),
        ]
        for ok, name, expected in checks:
            if not ok:
                raise ConfigError(
                    f"SamplingParams.{name}={getattr(self, name)!r}: expected {expected}"
                )
        # accept lists from configs but keep the dataclass hashable
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "eos_token_ids", tuple(int(i) for i in self.eos_token_ids))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True, kw_only=True)
class GeneratedSample:
    """One response. `behaviour_logprobs[t]` belongs to `response_ids[t]` (see module doc)."""

    prompt_index: int
    sample_index: int
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float] = field(repr=False)
    finish_reason: FinishReason
    policy_version: int = 0

    def __post_init__(self) -> None:
        assert len(self.response_ids) == len(self.behaviour_logprobs), "ids/logprobs misaligned"


@runtime_checkable
class GenerationEngine(Protocol):
    """Samples responses with the current policy weights; `policy_version` counts syncs."""

    policy_version: int

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GeneratedSample]:
        """Samples `params.n` responses per prompt, ordered by (prompt_index, sample_index)."""
        ...

    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], *, version: int | None = None
    ) -> None:
        """Copies new policy weights in place (in-memory sync from a trainer)."""
        ...

    def load_checkpoint(self, store: object, rel_dir: str, *, version: int | None = None) -> None:
        """Loads policy weights from a committed checkpoint directory in the store."""
        ...
