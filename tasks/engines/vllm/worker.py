"""Code that runs inside each vLLM worker (mixed into its class via `worker_extension_cls`).

Called by name through `LLM.collective_rpc("alignflow_...")`, on every tensor-parallel rank:

- `alignflow_untruncated_logprobs`: makes the sampler report alignflow's behaviour logprobs,
  `log softmax(logits / T)` *before* top-k/top-p. vLLM's own modes give either the raw
  model (T = 1) or the distribution after top-k/top-p; neither is the learner's number when
  T != 1 and a filter is on. The wrapper computes the log-softmax from the temperature-scaled
  logits the sampler hands to its top-k/top-p stage, then lets that stage sample as before.
- `alignflow_stage_bucket` / `alignflow_commit_weights`: a weight sync in packed buckets
  (`alignflow_join_group` / `alignflow_receive_bucket`: the buckets come by broadcast),
  each loaded as it comes, inside one layerwise reload: the sync's first bucket opens it
  (`initialize_layerwise_reload`), every bucket goes through `model.load_weights`, the
  commit closes it (`finalize_layerwise_reload`, which re-runs the backend's weight
  processing: the CPU backend repacks weights). That is what the worker's own
  `reload_weights(weights_iterator=...)` does in one call, spread over the sync's calls, so
  a sync holds one bucket, not the model: a 7B bf16 model (15.2 GB) staged whole does not
  fit beside an engine that took 95% of its GPU. vLLM keeps the tensors of a layer it has
  not all of (q without v, gate without up) until the rest comes; the bucket's last module
  is cloned as it is handed over, so what is kept is that layer's tensors, not the bucket.
  A sync that stops halfway leaves layers of both versions; `alignflow_drop_staged` closes
  the reload (the model runs again) and the engine serves no version until a whole sync
  (`VLLMEngine`: `UNKNOWN_VERSION`, the caller syncs again).
- `alignflow_stage_shared`: the same bucket given by handle (`vllm_ipc`: an engine that
  shares the trainer's GPU from another process; a hybrid engine of tensor parallel > 1
  gets the handles of all its trainer ranks, `vllm_ipc_group`, and each worker opens the
  one of its GPU); mapped on this worker's device, loaded, and the copies finished before
  it answers, since the sender frees the bucket then.

Runs inside vLLM's worker processes (the engine reads `Sampled` in its own); vLLM's
modules are imported when called, never at import.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from alignflow.tasks.engines.vllm import ipc
from alignflow.tasks.engines.vllm.weights import unpack


class Sampled:
    """Rows sampled by the workers in this process, for `VLLMEngine.progress`: an engine
    whose worker runs in its process (`uni`) sees every step's tokens."""

    rows = 0


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
        Sampled.rows += logits.shape[0]
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
        """Loads one bucket into the model now; returns the tensors loaded in this sync."""
        if not self.__dict__.get("_alignflow_loading"):
            self._alignflow_begin()
        with self._alignflow_config():
            self.model_runner.get_model().load_weights(
                handed_over(unpack(names, dtypes, shapes, offsets, buffer)))
        self._alignflow_loaded += len(names)
        return self._alignflow_loaded

    def alignflow_stage_shared(self, names: list[str], dtypes: list[str],
                               shapes: list[list[int]], offsets: list[int],
                               handles: dict[str, tuple]) -> int:
        """Loads one bucket the trainer shares by handle (`ipc.share`, keyed by device: the
        one made on this worker's GPU, opened at this process's index of it; on the CPU the
        one of this worker's tensor-parallel rank: `ipc.merged`)."""
        buffer = ipc.opened(handles, getattr(self, "device", None),
                            rank=int(getattr(self, "rank", 0)))
        try:
            return self.alignflow_stage_bucket(names, dtypes, shapes, offsets, buffer)
        finally:
            ipc.done_with(buffer)

    def _alignflow_begin(self) -> None:
        """Opens the sync's layerwise reload (each layer reloads once all its tensors came)."""
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        with self._alignflow_config():
            initialize_layerwise_reload(self.model_runner.get_model())
        self._alignflow_loading, self._alignflow_loaded = True, 0

    def _alignflow_finish(self) -> int:
        """Closes the reload opened by the sync's first bucket (layers it left untouched get
        their tensors back); returns how many tensors were loaded."""
        if not self.__dict__.pop("_alignflow_loading", False):
            return 0
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        with self._alignflow_config():
            finalize_layerwise_reload(self.model_runner.get_model(),
                                      self.model_runner.model_config)
        self._alignflow_repack_tied_head()
        return self.__dict__.pop("_alignflow_loaded", 0)

    def _alignflow_config(self):
        """vLLM's config as the current one, as the worker's own reload and weight updates
        run (weight loaders may read it)."""
        from vllm.config import set_current_vllm_config

        return set_current_vllm_config(self.vllm_config)

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
        """Receives one bucket's buffer from the trainer's broadcast and loads its tensors."""
        group = self.__dict__.get("_alignflow_group")
        if group is None:
            raise RuntimeError("alignflow_receive_bucket before alignflow_join_group")
        buffer = group.buffer(nbytes)
        group.broadcast(buffer)
        return self.alignflow_stage_bucket(names, dtypes, shapes, offsets, buffer)

    def alignflow_commit_weights(self) -> int:
        """Ends the sync: every layer processed for the backend; returns the tensors loaded."""
        return self._alignflow_finish()

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
        """Ends a sync that did not finish: the model runs again, with the buckets loaded so
        far (the engine serves no version until a whole sync); returns how many tensors."""
        return self._alignflow_finish()


def handed_over(tensors: list[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """The bucket's tensors for `load_weights`: views into its buffer, but those of its last
    module (`model.layers.3.mlp`: it may continue in the next bucket) cloned one at a time
    as they are handed over, so a layer vLLM keeps waiting for its other tensors holds its
    own, not the bucket. A bucket that is all one module goes as it is: what vLLM could
    keep of it is about the bucket anyway."""
    modules = [name.rsplit(".", 2)[0] for name, _ in tensors]
    tail = len(modules)
    while tail > 0 and modules[tail - 1] == modules[-1]:
        tail -= 1
    for i, (name, tensor) in enumerate(tensors):
        yield name, tensor.clone() if 0 < tail <= i else tensor
