"""Data-parallel building blocks without a process group: shards, specs, local reductions."""

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.advantages.normalize import whiten
from alignflow.tasks.distributed import group, reduce, sharding


def test_shards_cover_the_batch_in_whole_groups():
    shards = [sharding.shard_range(12, r, 3, group_size=2) for r in range(3)]
    assert shards == [range(0, 4), range(4, 8), range(8, 12)]
    assert sharding.shard(list("abcdefgh"), 1, 2, group_size=4) == list("efgh")


@pytest.mark.parametrize(("n", "world", "group_size", "match"), [
    (10, 2, 4, "10 rows are not whole groups of group_size=4"),
    (12, 2, 4, "3 groups of 4 rows do not split evenly over world_size=2"),
])
def test_uneven_shards_are_refused(n, world, group_size, match):
    with pytest.raises(ConfigError, match=match):
        sharding.shard_range(n, 0, world, group_size=group_size)


def test_group_spec_checks_rank_and_backend():
    with pytest.raises(ConfigError, match="rank=2: expected 0 <= rank < world_size=2"):
        group.GroupSpec(rank=2, world_size=2, master_addr="127.0.0.1", master_port=1)
    with pytest.raises(ConfigError, match="backend='mpi'"):
        group.GroupSpec(rank=0, world_size=1, master_addr="127.0.0.1", master_port=1,
                        backend="mpi")
    spec = group.GroupSpec(rank=0, world_size=4, master_addr="10.0.0.1", master_port=29500)
    assert group.with_rank(spec, 3, local_rank=1).rank == 3


def test_reductions_are_local_outside_a_group():
    if torch.distributed.is_initialized():
        pytest.skip("a process group from another test is active")
    x, mask = torch.randn(4, 5), torch.rand(4, 5) > 0.3
    assert reduce.global_count(mask) == float(mask.sum())
    assert reduce.global_sum(2.5) == 2.5
    assert reduce.global_shares({"loss": 1.5, "lr": 0.1}) == {"loss": 1.5, "lr": 0.1}
    assert reduce.gather_lists({"loss": [1.0]}) == {"loss": [1.0]}
    torch.testing.assert_close(reduce.global_whiten(x, mask), whiten(x, mask))
    mean, var, count = reduce.global_masked_moments(x, mask)
    assert count == float(mask.sum())
    torch.testing.assert_close(mean.float(), x[mask].mean())
    torch.testing.assert_close(var.float(), x[mask].var(unbiased=False))
