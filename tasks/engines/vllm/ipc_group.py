"""A sync by handle to hybrid engines whose tensor-parallel workers sit on several trainer
ranks' GPUs (issue 41, item 6): OpenRLHF's 4 × TP2 inside 8 actor GPUs.

Such an engine's worker j runs on the GPU of trainer rank i*TP+j, so no one process holds
a buffer every worker could map: each rank packs the bucket on its own GPU (the same
tensors in the same order on every rank: the same buckets), shares it (`ipc.share`: a CUDA
IPC handle; a shared-memory file's name on the CPU), and the handles are gathered to rank 0,
which drives the engines and sends engine i the handles of its ranks (`ipc.merged`); each
worker opens the one made on its GPU. What crosses to an engine is a few hundred bytes per
rank, not the bucket, and no bucket goes GPU → host → GPU.

One round per bucket, two collectives on the trainer's group (gloo objects): every rank's
handle (or the error that stopped its packing, or the end) gathered to all; then rank 0's
word once its engines answered, ok or why not. Only then does each rank drop its bucket
(the engine's copies are done: it answered), so a rank's extra memory is one bucket. A
failure anywhere (a rank's packing, an engine's load) ends the round on every rank with an
error; no rank goes on to the next bucket and every bucket's buffer is freed, so no
shared-memory file outlives the sync. Rank 0's `VLLMEngineActor` leaves the engines it
reached at `UNKNOWN_VERSION`, as any sync that stops halfway.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator

import torch

from alignflow.tasks.distributed.group import rank_and_size
from alignflow.tasks.engines.vllm import ipc
from alignflow.tasks.engines.vllm.weights import pack_buckets

Round = tuple[tuple, list[dict[str, tuple]]]  # (bucket metadata, every rank's handles)


def pack_device(on_gpu: bool) -> torch.device:
    """Where a rank packs its buckets: its own GPU (the engine worker on it maps them)."""
    if on_gpu and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather(item: tuple) -> list[tuple]:
    import torch.distributed as dist

    if rank_and_size()[1] == 1:
        return [item]
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, item)
    return parts


def _from_rank0(word: str | None) -> str | None:
    import torch.distributed as dist

    if rank_and_size()[1] == 1:
        return word
    box = [word]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _next(buckets: Iterator) -> tuple[tuple, object]:
    """This rank's part of a round: ("bucket", metadata, handles) and the bucket kept alive,
    ("end",) or ("error", why) when its packing stopped."""
    try:
        bucket = next(buckets)
    except StopIteration:
        return ("end",), None
    except Exception as exc:  # reported to every rank, then raised here too
        return ("error", f"{type(exc).__name__}: {exc}"), exc
    return ("bucket", bucket.as_args()[:-1], ipc.share(bucket.buffer)), bucket


def _settled(items: list[tuple]) -> bool:
    """Whether every rank is at the end (True) or has a bucket (False); else raises on every
    rank alike."""
    errors = [f"rank {r}: {item[1]}" for r, item in enumerate(items) if item[0] == "error"]
    if errors:
        raise RuntimeError("weight sync by handle stopped: " + "; ".join(errors))
    kinds = {item[0] for item in items}
    if len(kinds) > 1:
        ends = [r for r, item in enumerate(items) if item[0] == "end"]
        raise RuntimeError(f"weight sync by handle: ranks {ends} ran out of buckets before "
                           "the others (their tensors differ)")
    return kinds == {"end"}


class Rounds:
    """Every rank's side of one sync by handle. Rank 0 iterates it (a round per bucket:
    metadata and every rank's handles) and sends between rounds; the other ranks `follow`.
    Rank 0 `close`s it whatever happens, so the others learn how it ended."""

    def __init__(self, named: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int,
                 device: torch.device) -> None:
        self.device = device
        self._buckets = pack_buckets(named, bucket_bytes, device=device, alloc=ipc.shareable)
        self._rounds = self._run()
        self._started = False

    def __iter__(self) -> Iterator[Round]:
        return self._rounds

    def _run(self) -> Generator[Round, None, None]:
        self._started = True
        while True:
            item, bucket = _next(self._buckets)
            items = _all_gather(item)
            if isinstance(bucket, Exception):
                raise bucket
            try:
                if _settled(items):
                    return
            except RuntimeError:
                del bucket  # not kept alive by the traceback (its frame is this one)
                raise
            failed: BaseException | None = None
            try:
                yield item[1], [it[2] for it in items]
            except BaseException as exc:  # rank 0: its engines failed (GeneratorExit: closed)
                failed = exc
            word = _from_rank0(None if failed is None else f"{type(failed).__name__}: {failed}")
            del bucket  # the engines answered (or gave up): their copies are done
            ipc.collect("ipc", self.device)
            if failed is not None:
                raise failed
            if word is not None:
                raise RuntimeError(f"weight sync by handle stopped on rank 0: {word}")

    def follow(self) -> None:
        """A rank other than 0: its part of every round, until the last or a failure."""
        for _ in self:
            pass

    def fail(self, exc: BaseException) -> None:
        """Rank 0: its engines failed the round now open; every rank hears why and stops."""
        if not self._started:
            self.close()
            return
        try:
            self._rounds.throw(exc)
        except BaseException as raised:
            if raised is not exc:
                raise

    def close(self) -> None:
        """Rank 0, after its sync (or instead of one): a round it left open ends with an
        error on every rank; a sync it never began ends the others' first round."""
        if not self._started:
            self._started = True
            _all_gather(("error", "rank 0 could not start the sync"))
            return
        self._rounds.close()


def for_engines(handles: list[dict[str, tuple]], engines: Iterable[int],
                tensor_parallel_size: int) -> dict[int, dict[str, tuple]]:
    """Rank 0, one round: {engine: the handles of its ranks (`ipc.merged`)}, engine i on
    trainer ranks [i*TP, (i+1)*TP) (`placement.hybrid_slots`)."""
    tp = tensor_parallel_size
    return {i: ipc.merged(handles[i * tp:(i + 1) * tp]) for i in engines}
