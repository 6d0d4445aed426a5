"""What a vLLM engine counts as progress while `LLM.generate` runs, for the liveness check
(`vllm_liveness`): sequences finished, and tokens sampled where it can see them.

`LLM.generate` blocks until every request is done and offers one callback on the way: the
progress bar it updates per finished request (`use_tqdm` takes a tqdm class). A bar that
counts into `Finished` and writes nowhere gives the finished sequences. Tokens come from
the sampler wrapper in the worker (`vllm_worker.Sampled`, per decode step), seen here only
when the worker shares this process (`uni`: one GPU, the engine actors' case); with tensor
parallelism the workers are processes of their own, and finished sequences alone count
(a long sequence must then finish within the liveness window). Greedy requests skip the
wrapped sampler, so they count when they finish.
"""

from __future__ import annotations

from tqdm import tqdm


class Finished:
    """Sequences an engine finished; `bar` is what `LLM.generate(use_tqdm=...)` takes."""

    def __init__(self) -> None:
        self.n = 0

    def bar(self, *args, **kwargs) -> tqdm:
        return CountingBar(self, *args, **kwargs)


class Nowhere:
    """A file that keeps nothing: the bar is for counting, not for the log."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


class CountingBar(tqdm):
    """vLLM's progress bar, counting what it is told into `Finished` and printing nothing."""

    def __init__(self, finished: Finished, *args, **kwargs) -> None:
        self.finished = finished
        kwargs.update(file=Nowhere(), mininterval=3600.0, disable=False)
        super().__init__(*args, **kwargs)

    def update(self, n: float | None = 1) -> bool | None:
        self.finished.n += int(n or 0)
        return super().update(n)
