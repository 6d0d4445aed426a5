"""Progress where it used to mislead (issue 47, item 15): the count and what is left inside
a generate that is one micro-batch, no `3/3 iterations, eta 0s` when an asynchronous run
starts generating ahead, no `2/1 iterations` when a task names an iteration past the flow's
count (a campaign round's run), no ETA once the loop is over."""

from __future__ import annotations

import io

from alignflow.flows.cli.progress import Progress, beat_note
from alignflow.tasks.engines import hf
from alignflow.tasks.engines.base import SamplingParams


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress(total: int) -> tuple[Progress, io.StringIO, Clock]:
    stream, clock = io.StringIO(), Clock()
    p = Progress(stream=stream, live=False, clock=clock)
    p.start_run("r", "grpo", total_iterations=total)
    return p, stream, clock


def _lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_an_async_start_counts_the_oldest_running_iteration_and_has_no_eta_yet():
    p, out, clock = _progress(3)
    for it in range(3):  # the generator makes three batches ahead at once
        p.task_started(f"iter-{it:04d}/generate")
    clock.now += 5
    p.task_finished("iter-0000/generate", 5.0)
    assert _lines(out)[-1].endswith("(1/3 iterations, elapsed 5s)")
    p.task_started("iter-0000/learn")
    clock.now += 10
    p.task_finished("iter-0000/learn", 10.0)
    p.task_finished("iter-0001/generate", 15.0)  # iteration 1's turn: 15s after iteration 0's
    p.task_started("iter-0001/learn")
    clock.now += 4
    p.heartbeat({})
    # eta = 15 (between turns) × (3 - 1) - 4 spent in iteration 1 = 26
    assert _lines(out)[-1].endswith("(2/3 iterations, elapsed 19s, eta 26s)")


def test_no_iteration_past_the_flows_count():
    p, out, clock = _progress(1)
    _step = [("iter-0000/generate", 2.0), ("iter-0000/learn", 3.0), ("iter-0001/eval", 1.0)]
    for key, seconds in _step:
        p.task_started(key)
        clock.now += seconds
        p.task_finished(key, seconds)
    assert not any("2/1" in line for line in _lines(out))
    assert _lines(out)[-1].endswith("(1/1 iterations, elapsed 6s)")


def test_no_eta_once_the_loop_is_over():
    p, out, clock = _progress(2)
    for key in ("iter-0000/learn", "iter-0001/learn", "export"):
        p.task_started(key)
        clock.now += 10
        p.task_finished(key, 10.0)
    lines = _lines(out)
    assert lines[-2].endswith("(2/2 iterations, elapsed 20s, eta 0s)")
    assert lines[-1] == "[run r] export done in 10.0s (2/2 iterations, elapsed 30s)"


def test_what_is_left_of_a_task_from_its_beat():
    beat = {"done": 1200, "total": 1536, "unit": "tokens (3/16 sequences)"}
    # 40s for 1,200 of 1,536: 40 × 336 / 1200 = 11.2s left
    assert beat_note(beat, 40.0) == ": 1,200/1,536 tokens (3/16 sequences), ~11s left"
    assert beat_note(beat) == ": 1,200/1,536 tokens (3/16 sequences)"
    assert beat_note({"done": 0, "total": 10, "unit": "steps"}, 5.0) == ": 0/10 steps"


def test_one_micro_batch_of_generate_beats_as_its_tokens_come(monkeypatch, tiny_model_dir):
    beats: list[tuple] = []
    monkeypatch.setattr(hf, "beat", lambda *a: beats.append(a))
    engine = hf.HFEngine.from_pretrained(str(tiny_model_dir), micro_rollout_batch_size=8)
    engine.generate([[1, 2, 3], [4, 5]], SamplingParams(max_new_tokens=6, n=2, seed=0,
                                                        eos_token_ids=(10**6,)))
    assert len(beats) == 6  # one per decode step of the one micro-batch, not one at its end
    done = [b[0] for b in beats]
    assert done == [4, 8, 12, 16, 20, 24] and {b[1] for b in beats} == {24}
    assert beats[0][2] == "tokens (0/4 sequences)" and beats[-1][2] == "tokens (4/4 sequences)"
