"""Sample packing for training: group sequences into micro-batches under a token budget.

Each group becomes one packed row (`artifacts.tensors.pack`) for
`logprobs.packed_sequence_logprobs`, so no compute goes to padding.
"""

from __future__ import annotations

from alignflow.errors import ConfigError


def plan_packed_micro_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped so each group's total length is <= max_tokens (first-fit decreasing).

    Deterministic for a given input: ties keep the original order.
    """
    too_long = [n for n in lengths if n > max_tokens]
    if too_long:
        raise ConfigError(f"packing: a sequence of {max(too_long)} tokens exceeds "
                          f"max_tokens={max_tokens}; raise max_tokens or truncate")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    room: list[int] = []
    for i in order:
        slot = next((g for g, r in enumerate(room) if r >= lengths[i]), None)
        if slot is None:
            groups.append([i])
            room.append(max_tokens - lengths[i])
        else:
            groups[slot].append(i)
            room[slot] -= lengths[i]
    return [sorted(g) for g in groups]
