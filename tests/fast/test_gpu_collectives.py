"""The collectives a data-parallel step makes, on the group the code forms on GPUs, with
NCCL's refusals (`tasks/distributed/strict.py`): every step statistic, count, gathered list
and checkpoint byte count is a CPU tensor, which an NCCL-only group refuses at the first
optimizer step of any run with more than one worker per role (issue 21 §3.1)."""

from __future__ import annotations

from unittest import mock

import pytest

from alignflow.tasks.distributed import group
from tests.fixtures.ranks import run_ranks


def gpu_group(rank: int, world: int, port: int) -> str:
    """Join as a rank on a GPU would (the backend the code picks with CUDA), strict."""
    import os

    os.environ["ALIGNFLOW_STRICT_GROUPS"] = "1"
    with mock.patch("torch.cuda.is_available", return_value=True):
        backend = group.default_backend()
    group.join(group.GroupSpec(rank=rank, world_size=world, master_addr="127.0.0.1",
                               master_port=port, backend=backend, local_rank=rank))
    return backend


def _statistics(rank: int, world: int, port: int) -> dict:
    import torch

    from alignflow.tasks.distributed import reduce

    backend = gpu_group(rank, world, port)
    mask = torch.tensor([1, 1, 0]) if rank == 0 else torch.tensor([1, 0, 0])
    x = torch.tensor([1.0, 2.0, 5.0]) * (rank + 1)
    mean, var, count = reduce.global_masked_moments(x, mask)
    return {"backend": backend, "sum": reduce.global_sum(1.5), "count": reduce.global_count(mask),
            "shares": reduce.global_shares({"loss": 1.0 + rank, "grad_norm": 2.0}),
            "lists": reduce.gather_lists({"loss": [float(rank)]}),
            "moments": [float(mean), float(var), count]}


def test_step_statistics_reduce_on_the_group_a_gpu_run_forms():
    results = run_ranks(_statistics, 2)
    assert all(isinstance(r, dict) for r in results), results
    for r in results:
        assert r["sum"] == 3.0 and r["count"] == 3.0
        assert r["shares"] == {"loss": 3.0, "grad_norm": 2.0}
        assert r["lists"] == {"loss": [0.0, 1.0]}
        assert r["moments"] == pytest.approx([5 / 3, 2 / 9, 3.0])  # values 1, 2, 2
    assert results[0]["backend"] == group.GPU_BACKEND == "cpu:gloo,cuda:nccl"
