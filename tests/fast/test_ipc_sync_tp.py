"""A hybrid engine of tensor parallel 2 is synced by the handles of both its trainer ranks
(issue 41, item 6; `tasks/engines/vllm/ipc_group.py`).

Two trainer ranks (processes in a gloo group) each pack every bucket and share it (on the
CPU a shared-memory file: its name is the handle); rank 0's `VLLMEngineActor` sends its
engine both ranks' handles; each of the engine's two workers (alignflow's worker extension,
its messages pickled as vLLM's `collective_rpc` sends them) opens its own rank's. The ranks
here hold different weights, so a worker that opened the other rank's handle shows:
- each worker's weights are bitwise its rank's, as a byte sync of them gives;
- one bucket's message is < 4 KiB where the bucket is 960,000 bytes;
- a sync that stops halfway (a rank's trainer dies, or the engine fails a load) stops on
  both ranks, leaves the engine at `UNKNOWN_VERSION`, and no bucket's file outlives it;
  one rank 0 cannot start ends the other rank's first round.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
import types

import pytest
import torch

from alignflow.tasks.engines.base import UNKNOWN_VERSION
from alignflow.tasks.engines.vllm import ipc, ipc_group
from alignflow.tasks.engines.vllm.actor import VLLMEngineActor
from alignflow.tasks.engines.vllm.weights import WeightBucket, empty, pack_buckets
from alignflow.tasks.steps import host_engine

BUCKET = 1 << 20
HANDLE_LIMIT = 4 << 10
N = 30  # tensors of 160,000 bytes: six to a bucket, five buckets


def _tensors(rank: int) -> dict[str, torch.Tensor]:
    """Rank `rank`'s weights: the same names and shapes on every rank, other values."""
    g = torch.Generator().manual_seed(3 + rank)
    return {f"model.layers.{i}.mlp.down_proj.weight": torch.randn(40_000, generator=g)
            for i in range(N)}


def _fake_vllm() -> None:
    """vLLM's layerwise reload and config context, as the worker extension imports them."""
    import contextlib

    reload = types.ModuleType("vllm.model_executor.model_loader.reload")
    reload.initialize_layerwise_reload = lambda model: None
    reload.finalize_layerwise_reload = lambda model, config: model.finish()
    config = types.ModuleType("vllm.config")
    config.set_current_vllm_config = lambda c: contextlib.nullcontext()
    sys.modules[reload.__name__], sys.modules[config.__name__] = reload, config


def _workers(tp: int) -> list:
    from tests.fast.test_sync_staging import LayerwiseModel, Worker

    workers = []
    for rank in range(tp):
        worker = Worker(LayerwiseModel({n: torch.zeros_like(t) for n, t in _tensors(0).items()}))
        worker.rank = rank  # vLLM's worker: its tensor-parallel rank
        workers.append(worker)
    return workers


class Remote:
    def __init__(self, fn) -> None:
        self.remote = fn


class EngineStub:
    """An engine actor's sync calls answered at once, as `EngineHost` → `VLLMEngine` make
    them: the bucket (its buffer: handles) becomes one `collective_rpc` message, pickled to
    each worker process."""

    def __init__(self, workers: list, fail_at: int | None = None) -> None:
        self.workers, self.fail_at, self.wire = workers, fail_at, []
        self.stage_bucket = Remote(self._stage)
        self.commit_weights = Remote(self._commit)

    def _rpc(self, method: str, args: tuple) -> list:
        wire = pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)
        self.wire.append(len(wire))
        if len(self.wire) == self.fail_at:
            raise RuntimeError("the engine failed a load")
        return [getattr(w, m)(*a) for w in self.workers for m, a in [pickle.loads(wire)]]

    def _stage(self, *args) -> list:
        return self._rpc(*ipc.message(WeightBucket(*args), "bytes"))

    def _commit(self, version: int) -> int:
        self._rpc("alignflow_commit_weights", ())
        return version


def _fleet(engine: EngineStub) -> VLLMEngineActor:
    """Rank 0's `VLLMEngineActor` of one hybrid engine × TP 2, its Ray calls answered now."""
    fleet = object.__new__(VLLMEngineActor)
    fleet.config = types.SimpleNamespace(tensor_parallel_size=2, sync_bucket_bytes=BUCKET,
                                         generate_timeout_s=60.0)
    fleet._actors, fleet._versions, fleet._target = [engine], [0], 0
    fleet._starting, fleet._synced = {}, False
    fleet._live = lambda: dict(enumerate(fleet._actors))
    fleet._begin_sync = lambda live, timeout: live
    fleet._wait = lambda calls, timeout, what, **kw: [calls[i] for i in calls]
    return fleet


def _named(rank: int, stop_after: int | None):
    for i, item in enumerate(_tensors(rank).items()):
        if i == stop_after:
            raise RuntimeError("the trainer died mid-sync")
        yield item


CASES = ("ok", "rank 1 dies", "engine fails", "rank 0 cannot start")


def _rank(rank: int, init: str, out) -> None:
    """One trainer rank of the TP-2 group, through every case; what it saw goes to `out`."""
    import torch.distributed as dist

    _fake_vllm()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    files: list[str] = []
    share = ipc.share

    def noted(buffer):
        handles = share(buffer)
        files.append(handles["cpu"][1][1].decode())
        return handles
    ipc.share = noted
    seen = {}
    for case in CASES:
        files.clear()
        seen[case] = _sync(rank, case)
        seen[case].update(shared=len(files),
                          left=[f for f in files if os.path.exists(f"/dev/shm{f}")])
    dist.destroy_process_group()
    out.put(pickle.dumps((rank, seen)))


def _sync(rank: int, case: str) -> dict:
    """Rank 0 drives the engine, rank 1 follows; a case's failure ends both alike."""
    stop = 20 if case == "rank 1 dies" and rank == 1 else None
    rounds = ipc_group.Rounds(_named(rank, stop), BUCKET, torch.device("cpu"))
    seen: dict = {}
    try:
        if rank == 0 and case == "rank 0 cannot start":  # its engines refused the sync
            rounds.close()
        elif rank == 0:
            engine = EngineStub(_workers(2), fail_at=3 if case == "engine fails" else None)
            fleet = _fleet(engine)
            try:
                fleet.update_weights(rounds, version=5)
            finally:
                rounds.close()
                seen.update(versions=fleet._versions, wire=engine.wire,
                            params=[w.model_runner.get_model().params for w in engine.workers])
        else:
            rounds.follow()
    except Exception as exc:
        seen["error"] = str(exc)
    return seen


@pytest.fixture(scope="module")
def group_sync(tmp_path_factory) -> dict[str, dict[int, dict]]:
    """{case: {rank: what it saw}} of the TP-2 group (two spawned processes)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    init = f"file://{tmp_path_factory.mktemp('tp2')}/rendezvous"
    procs = [ctx.Process(target=_rank, args=(r, init, out)) for r in range(2)]
    for p in procs:
        p.start()
    seen = dict(pickle.loads(out.get(timeout=120)) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return {case: {rank: seen[rank][case] for rank in seen} for case in CASES}


def _by_bytes(rank: int) -> dict[str, torch.Tensor]:
    """A worker's weights after a byte sync of rank `rank`'s tensors (the bucket pickled)."""
    _fake_vllm()
    (worker,) = _workers(1)
    for bucket in pack_buckets(_tensors(rank).items(), BUCKET, alloc=empty):
        method, args = pickle.loads(pickle.dumps(ipc.message(bucket, "bytes")))
        getattr(worker, method)(*args)
    worker.alignflow_commit_weights()
    return worker.model_runner.get_model().params


def test_each_tp_worker_loads_its_own_ranks_bucket_by_handle(group_sync):
    lead, other = group_sync["ok"][0], group_sync["ok"][1]
    assert "error" not in lead and "error" not in other, (lead, other)
    assert lead["versions"] == [5]
    for tp_rank, params in enumerate(lead["params"]):
        expected, by_bytes = _tensors(tp_rank), _by_bytes(tp_rank)
        for name, tensor in expected.items():
            assert torch.equal(params[name], tensor), (tp_rank, name)
            assert torch.equal(params[name], by_bytes[name]), (tp_rank, name)
    stages = lead["wire"][:-1]  # five buckets, then the commit
    assert len(stages) == 5 and max(stages) < HANDLE_LIMIT
    bucket = 6 * 160_000
    print(f"one {bucket}-byte bucket: {max(stages)} bytes by the TP-2 engine's handles")
    assert lead["shared"] == other["shared"] == 5
    assert lead["left"] == other["left"] == []


@pytest.mark.parametrize("case, lead_says, other_says", [
    ("rank 1 dies", "rank 1: RuntimeError: the trainer died", "the trainer died"),
    ("engine fails", "the engine failed a load", "stopped on rank 0"),
])
def test_a_sync_by_handles_that_stops_halfway_stops_every_rank(group_sync, case, lead_says,
                                                               other_says):
    seen = group_sync[case]
    assert lead_says in seen[0].get("error", "") and other_says in seen[1].get("error", "")
    assert seen[0]["versions"] == [UNKNOWN_VERSION]
    assert seen[0]["shared"] >= 2 and seen[0]["left"] == seen[1]["left"] == []


def test_a_sync_rank_0_cannot_start_ends_the_others_first_round(group_sync):
    seen = group_sync["rank 0 cannot start"]
    assert "rank 0 could not start the sync" in seen[1].get("error", "")
    assert seen[0]["shared"] == 0 and seen[1]["shared"] == 1 and seen[1]["left"] == []


def test_the_plan_says_tp2_hybrid_engines_are_synced_by_handle():
    mode, why = ipc.planned_mode(in_host=False, ranks=8, tensor_parallel_size=2, hybrid=True,
                                 transport="ray")
    assert mode == "cuda-ipc" and "each tensor-parallel worker opens" in why


def test_only_hybrid_engine_actors_are_synced_by_every_ranks_handles():
    def host(in_host: bool, hybrid: bool | None):
        engine = types.SimpleNamespace(kind="vllm", in_host=in_host)
        engines = None if hybrid is None else types.SimpleNamespace(hybrid=hybrid)
        return types.SimpleNamespace(spec=types.SimpleNamespace(
            plan=types.SimpleNamespace(engine=engine), engines=engines))
    assert host_engine.by_handles(host(False, True))  # 4 × TP2 inside 8 actor GPUs
    assert not host_engine.by_handles(host(False, False))  # engines on GPUs of their own
    assert not host_engine.by_handles(host(True, None))  # in-process (per-rank) engines
