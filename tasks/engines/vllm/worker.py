"""Code that runs inside each vLLM worker (mixed into its class via `worker_extension_cls`).

Called by name through `LLM.collective_rpc("alignflow_...")`, on every tensor-parallel rank:

- `alignflow_untruncated_logprobs`: makes the sampler report alignflow's behaviour logprobs,
  `log softmax(logits / T)` *before* top-k/top-p. vLLM's own modes give either the raw
  model (T = 1) or the distribution after top-k/top-p; neither is the learner's number when
  T != 1 and a filter is on. The wrapper computes the log-softmax from the temperature-scaled
  logits the sampler hands to its top-k/top-p stage, then lets that stage sample as before.
- `alignflow_stage_bucket` / `alignflow_commit_weights`: a weight sync in packed buckets
  (`alignflow_join_group` / `alignflow_receive_bucket`: the buckets come by broadcast).
  Buckets are staged, then loaded in one `reload_weights(weights_iterator=...)` call — the
  worker's in-place reload, which re-runs the backend's weight processing (the CPU backend
  repacks weights, so copying into `model.load_weights` directly does not work there).
  Staging costs one model copy in host memory for the duration of a sync.

Only imported inside a vLLM worker process; vLLM modules are imported lazily.
"""

from __future__ import annotations

import torch

from alignflow.tasks.engines.vllm.weights import unpack


class UntruncatedLogprobs(torch.nn.Module):
    """Wraps vLLM's top-k/top-p sampler; returns (tokens, log softmax of its input logits).

    The input logits are already divided by the temperature (greedy rows by 1), and the
    log-softmax is taken before the wrapped sampler filters them in place.
    """

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        inner.logprobs_mode = "raw_logprobs"  # it need not compute its own, truncated ones

    def forward(self, logits: torch.Tensor, generators, k, p):
        logprobs = logits.log_softmax(dim=-1, dtype=torch.float32)
        sampled, _ = self.inner(logits, generators, k, p)
        return sampled, logprobs


class AlignflowWorkerExtension:
    """Mixed into vLLM's worker class; `self` is the worker."""

    def alignflow_untruncated_logprobs(self) -> bool:
        sampler = getattr(self.model_runner, "sampler", None)
        inner = getattr(sampler, "topk_topp_sampler", None)
        if inner is None:
            raise RuntimeError(
                f"vLLM worker {type(self.model_runner).__name__} has no sampler.topk_topp_sampler"
                "; alignflow's behaviour logprobs need vLLM's V1 model runner "
                "(set VLLM_USE_V2_MODEL_RUNNER=0)")
        if sampler.logprobs_mode != "processed_logprobs":
            raise RuntimeError(f"vLLM logprobs_mode={sampler.logprobs_mode!r}; alignflow "
                               "builds its engine with 'processed_logprobs'")
        if not isinstance(inner, UntruncatedLogprobs):
            sampler.topk_topp_sampler = UntruncatedLogprobs(inner)
        return True

    def alignflow_stage_bucket(self, names: list[str], dtypes: list[str],
                               shapes: list[list[int]], offsets: list[int],
                               buffer: torch.Tensor) -> int:
        staged = self.__dict__.setdefault("_alignflow_staged", [])
        staged.extend(unpack(names, dtypes, shapes, offsets, buffer))
        return len(staged)

    def alignflow_join_group(self, host: str, port: int, first_rank: int, world: int,
                             backend: str, timeout_s: float) -> int:
        """Joins the trainer's weight-sync group as rank `first_rank` + this worker's rank."""
        from alignflow.tasks.engines.vllm.broadcast import SyncGroup

        self.alignflow_leave_group()  # the group of engines before a restart
        rank = first_rank + int(getattr(self, "rank", 0))
        self._alignflow_group = SyncGroup(backend, host, port, rank, world, timeout_s)
        return rank

    def alignflow_leave_group(self) -> bool:
        """Closes this worker's side of the weight-sync group (NCCL: aborted, so nothing
        waits on a peer that died)."""
        group = self.__dict__.pop("_alignflow_group", None)
        if group is not None:
            group.close()
        return group is not None

    def alignflow_receive_bucket(self, names: list[str], dtypes: list[str],
                                 shapes: list[list[int]], offsets: list[int], nbytes: int) -> int:
        """Receives one bucket's buffer from the trainer's broadcast and stages its tensors."""
        group = self.__dict__.get("_alignflow_group")
        if group is None:
            raise RuntimeError("alignflow_receive_bucket before alignflow_join_group")
        buffer = group.buffer(nbytes)
        group.broadcast(buffer)
        return self.alignflow_stage_bucket(names, dtypes, shapes, offsets, buffer)

    def alignflow_commit_weights(self) -> int:
        """Loads every staged tensor in one in-place reload; returns how many."""
        staged = self.__dict__.pop("_alignflow_staged", [])
        if staged:
            self.reload_weights(weights_iterator=iter(staged), is_checkpoint_format=True)
            self._alignflow_repack_tied_head()
        return len(staged)

    def _alignflow_repack_tied_head(self) -> None:
        """A tied LM head loads no weights of its own, so the reload skips it; but the CPU
        backend packed a private copy of the embedding for its matmul. Re-pack it from the
        (reloaded, shared) embedding. A no-op on GPU, where the head reads the shared tensor."""
        hf_config = self.model_runner.model_config.hf_config
        head = getattr(self.model_runner.get_model(), "lm_head", None)
        method = getattr(head, "quant_method", None)
        if getattr(hf_config, "tie_word_embeddings", False) and method is not None:
            method.process_weights_after_loading(head)

    def alignflow_drop_staged(self) -> int:
        return len(self.__dict__.pop("_alignflow_staged", []))
