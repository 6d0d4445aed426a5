"""Several reward servers serving one reward, as OpenRLHF reads `--remote_rm_url a,b`: they
are replicas, not different rewards. A batch is cut into contiguous shards, one per server,
scored at the same time, and put back in order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from alignflow.tasks.rewards.base import RewardOutput, RewardSource, check_batch, merge_outputs


class Replicas:
    """A RewardSource spreading each batch over `sources` (equal, contiguous shards)."""

    def __init__(self, sources: list[RewardSource]) -> None:
        self.sources = list(sources)

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        k = max(1, min(len(self.sources), len(queries)))
        bounds = [len(queries) * i // k for i in range(k + 1)]
        shards = [(bounds[i], bounds[i + 1]) for i in range(k)]

        def run(index: int) -> RewardOutput:
            lo, hi = shards[index]
            return self.sources[index].score(queries[lo:hi], prompts[lo:hi], labels[lo:hi])

        with ThreadPoolExecutor(max_workers=k) as pool:
            parts = list(pool.map(run, range(k)))
        return merge_outputs(parts, [hi - lo for lo, hi in shards])
