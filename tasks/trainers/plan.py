"""Which examples each optimizer step reads: one seeded minibatch planner for every flow.

Epoch `e` visits the examples in the order `randperm(rows, seed=order_seed + e)`; step `s`
reads slice `s % steps_per_epoch` of epoch `s // steps_per_epoch`. The order is a pure
function of (order seed, epoch, step), so a resumed run consumes exactly the examples an
uninterrupted run would, and a task can start at any step without replaying earlier ones.
Steps are split into chunks of `save_steps`, one durable task each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from alignflow.artifacts.journal import journal_record


@journal_record
@dataclass(frozen=True)
class Plan:
    """A training schedule, fixed once (journalled) so a resume walks the same steps.

    `first_step` is the trainer's step count when the plan starts (a later round of a loop
    continues one optimizer and schedule); plan steps count from 0.
    """

    order_seed: int
    train_rows: int
    steps_per_epoch: int
    total_steps: int
    save_steps: int
    first_step: int = 0

    @classmethod
    def for_epochs(cls, order_seed: int, rows: int, batch_size: int, epochs: int, *,
                   save_steps: int = -1, drop_last: bool = False, max_steps: int | None = None,
                   first_step: int = 0) -> Plan:
        """`epochs` passes over `rows` examples; `drop_last` drops each epoch's partial batch."""
        per_epoch = rows // batch_size if drop_last else math.ceil(rows / batch_size)
        total = per_epoch * epochs
        total = min(total, max_steps) if max_steps else total
        chunk = total if save_steps < 0 else min(save_steps, total)
        return cls(order_seed, rows, per_epoch, total, max(chunk, 1), first_step)

    @property
    def chunks(self) -> int:
        return math.ceil(self.total_steps / self.save_steps) if self.total_steps else 0

    def chunk_steps(self, chunk: int) -> range:
        return range(chunk * self.save_steps, min((chunk + 1) * self.save_steps, self.total_steps))

    def indices(self, step: int, batch_size: int) -> list[int]:
        """Positions of the examples that plan step `step` consumes."""
        epoch, b = divmod(step, self.steps_per_epoch)
        return epoch_order(self.order_seed, epoch, self.train_rows)[b * batch_size:
                                                                    (b + 1) * batch_size]


def epoch_order(order_seed: int, epoch: int, n: int) -> list[int]:
    """Epoch `epoch`'s order of `n` examples (torch's randperm: imported here, where a worker
    draws it, so the driver that plans imports no torch)."""
    import torch

    return torch.randperm(n, generator=torch.Generator().manual_seed(order_seed + epoch)).tolist()


def micro_batches(idx: list[int], size: int) -> list[dict[str, list[int]]]:
    """One optimizer step's examples as micro-batches of at most `size` (the trainer's input)."""
    return [{"idx": idx[i : i + size]} for i in range(0, len(idx), size)]
