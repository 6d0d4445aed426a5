"""Splitting a step's rows over data-parallel ranks, keeping sample groups whole.

Every rank gets the same number of rows (ZeRO's collectives need the same number of
micro-batches on every rank), and the rows of one prompt's group (GRPO's n samples) stay
on one rank, so group baselines need no communication.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from alignflow.errors import ConfigError

T = TypeVar("T")


def shard_range(n: int, rank: int, world_size: int, *, group_size: int = 1) -> range:
    """Row indices of `rank`'s contiguous shard of `n` rows, in whole groups of `group_size`."""
    if n % group_size:
        raise ConfigError(f"shard_range: {n} rows are not whole groups of group_size={group_size}")
    groups = n // group_size
    if groups % world_size:
        raise ConfigError(f"shard_range: {groups} groups of {group_size} rows do not split evenly "
                          f"over world_size={world_size}; expected a multiple of {world_size}")
    size = groups // world_size * group_size
    return range(rank * size, (rank + 1) * size)


def shard(items: Sequence[T], rank: int, world_size: int, *, group_size: int = 1) -> list[T]:
    """`rank`'s rows of `items` (see `shard_range`)."""
    return [items[i] for i in shard_range(len(items), rank, world_size, group_size=group_size)]
