"""How `VLLMEngineActor` sends one sync's buckets to its engines: through Ray's object
store, broadcast over the weight-sync group (`vllm_broadcast`), or, to hybrid engines on
their trainer ranks' GPUs, as the handles every rank made (`vllm_ipc_group`). Each bucket
reaches every engine up, which loads it before the next is sent: one bucket at a time."""

from __future__ import annotations

from alignflow.tasks.engines.vllm import ipc_group
from alignflow.tasks.engines.vllm.broadcast import BroadcastSender
from alignflow.tasks.engines.vllm.weights import pack_buckets


class Senders:
    """Mixed into `VLLMEngineActor` (its `config`, `transport`, `_sender`, `_actors`,
    `_call`, `_wait` and `_close_sync`)."""

    def _send_by_ray(self, named_tensors, timeout: float, live: dict[int, object]) -> None:
        import ray

        for bucket in pack_buckets(named_tensors, self.config.sync_bucket_bytes):
            args = [ray.put(a) for a in bucket.as_args()]
            del bucket  # before the next is packed: one bucket at a time
            self._wait(self._call(live, "stage_bucket", *args), timeout, "sync")

    def _send_by_broadcast(self, named_tensors, timeout: float, live: dict[int, object]) -> None:
        if self._sender is not None and self._sender.members != tuple(live):
            self._close_sync(survivors=[self._actors[i] for i in self._sender.members if i in live])
        if self._sender is None:  # formed with the engines up now
            sender = BroadcastSender(self.transport, timeout_s=timeout)
            sender.connect(live, self._wait, self.config.tensor_parallel_size)
            self._sender = sender
        try:
            for bucket in pack_buckets(named_tensors, self.config.sync_bucket_bytes,
                                       device=self._sender.group.device):
                self._sender.send(bucket, live, self._wait)
                del bucket  # before the next is packed: one bucket on this GPU at a time
        except BaseException:
            self._close_sync(survivors=list(live.values()))
            raise

    def _send_by_handles(self, rounds: ipc_group.Rounds, timeout: float,
                         live: dict[int, object]) -> None:
        """Each engine up is sent, per bucket, the handles of its trainer ranks (the bucket
        as `stage_bucket`'s buffer: `ipc.message` sends a worker handles for it); the ranks
        drop their buckets once all engines answered."""
        tp = self.config.tensor_parallel_size
        try:
            for meta, handles in rounds:
                each = ipc_group.for_engines(handles, live, tp)
                self._wait({i: live[i].stage_bucket.remote(*meta, h) for i, h in each.items()},
                           timeout, "sync")
        except Exception as exc:
            rounds.fail(exc)  # the other ranks hear why, and drop their buckets
            raise
