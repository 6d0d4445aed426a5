"""Progress lines for non-terminal output: format, iteration numbering (the task keys'
own, as in SQL and `--rerun-from`), ETA arithmetic, the heartbeat of running tasks."""

from __future__ import annotations

import io

import pytest

from alignflow.flows.cli.progress import Progress, format_duration, iteration_of


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress(live: bool | None = None) -> tuple[Progress, io.StringIO, Clock]:
    stream, clock = io.StringIO(), Clock()
    return Progress(stream=stream, live=live, clock=clock), stream, clock


def _step(p: Progress, clock: Clock, key: str, seconds: float, cached: bool = False) -> None:
    if not cached:  # the driver starts only live tasks; a replayed one is only finished
        p.task_started(key)
    clock.now += seconds
    p.task_finished(key, seconds, cached)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (42.4, "42s"), (62, "1m02s"), (130, "2m10s"), (3723, "1h02m03s"), (-3, "0s"),
])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_iteration_of_task_keys():
    assert iteration_of("iter-0003/learn") == 3
    assert iteration_of("round-2/iter-0012/generate") == 12
    assert iteration_of("prepare") is None and iteration_of("iter-x/learn") is None


def test_plain_lines_with_eta_from_mean_iteration_time():
    p, out, clock = _progress()
    assert p.live is False  # StringIO is not a terminal
    p.start_run("abc", "grpo", total_iterations=3)
    _step(p, clock, "iter-0000/generate", 2.0)
    _step(p, clock, "iter-0000/learn", 8.04)
    _step(p, clock, "iter-0001/generate", 3.0)  # iteration 0 took 10.04s
    p.log("reward mean 0.25")
    clock.now += 65.0
    p.task_finished("iter-0001/learn", 65.0)
    clock.now += 1.0
    p.close("SUCCESSFUL")
    assert out.getvalue().splitlines() == [
        "[run abc] start flow grpo, 3 iterations",
        "[run abc] iter-0000/generate done in 2.0s (1/3 iterations, elapsed 2s)",
        "[run abc] iter-0000/learn done in 8.0s (1/3 iterations, elapsed 10s)",
        # eta = 10.04 (between iteration starts) * (3 - 1) - 3.0 spent in iteration 1 = 17.08
        "[run abc] iter-0001/generate done in 3.0s (2/3 iterations, elapsed 13s, eta 17s)",
        "[run abc] reward mean 0.25",
        # 65s past the mean: the current iteration's overrun clamps the eta at 0
        "[run abc] iter-0001/learn done in 1m05s (2/3 iterations, elapsed 1m18s, eta 0s)",
        "[run abc] finished flow grpo: 2 iterations (0 replayed), 4 tasks (0 cached, 0 failed) "
        "in 1m19s",
    ]


def test_cached_iterations_do_not_shorten_the_eta():
    p, out, clock = _progress()
    p.start_run("r1", "dpo", total_iterations=4)
    _step(p, clock, "iter-0000/learn", 0.0, cached=True)
    _step(p, clock, "iter-0001/learn", 0.0, cached=True)
    clock.now += 0.5  # replay overhead before the first real task
    _step(p, clock, "iter-0002/learn", 30.0)
    _step(p, clock, "iter-0003/learn", 10.0)
    lines = out.getvalue().splitlines()
    assert lines[1] == "[run r1] iter-0000/learn cached (1/4 iterations, elapsed 0s)"
    # only iterations 2 and 3 ran (30.0s apart): eta = 30.0 * (4 - 3) - 10 = 20
    assert lines[4] == "[run r1] iter-0003/learn done in 10.0s (4/4 iterations, elapsed 40s, eta 20s)"
    p.close("SUCCESSFUL")
    assert "4 iterations (2 replayed), 4 tasks (2 cached" in out.getvalue().splitlines()[-1]


def test_overlapping_iterations_are_counted_once():
    """Asynchronous RL starts iteration k+1's generation while k learns: the summary counts
    each iteration once (it used to count every switch back and forth)."""
    p, out, clock = _progress()
    p.start_run("a", "grpo", total_iterations=2)
    for key in ("iter-0000/generate", "iter-0001/generate", "iter-0000/learn",
                "iter-0001/learn"):
        _step(p, clock, key, 1.0)
    p.close("SUCCESSFUL")
    assert "2 iterations (0 replayed), 4 tasks" in out.getvalue().splitlines()[-1]


def test_a_heartbeat_says_what_runs_and_how_far():
    p, out, clock = _progress()
    p.start_run("h", "grpo", total_iterations=10)
    p.task_started("iter-0003/generate")
    clock.now += 40
    p.heartbeat({"iter-0003/generate": {"done": 24, "total": 64, "unit": "sequences"}})
    # what is left of the task at its pace: 40s × (64 - 24) / 24 = 66.7s
    assert out.getvalue().splitlines()[-1] == (
        "[run h] iter-0003/generate running 40s: 24/64 sequences, ~1m07s left "
        "(4/10 iterations, elapsed 40s)")
    assert p.status_line() == ("[run h] grpo iter-0003/generate running 40s: 24/64 sequences, "
                               "~1m07s left (4/10 iterations, elapsed 40s)")


def test_unknown_total_failures_and_tasks_outside_iterations():
    p, out, clock = _progress()
    p.start_run("x", "sft")
    _step(p, clock, "prepare", 0.5)
    p.task_started("train", iteration=6)
    clock.now += 1.5
    p.task_finished("train", 1.5, status="FAILED_CAUGHT")
    p.close("SUCCESSFUL")
    assert out.getvalue().splitlines() == [
        "[run x] start flow sft",
        "[run x] prepare done in 0.5s (elapsed 0s)",
        "[run x] train failed_caught after 1.5s (elapsed 2s)",
        "[run x] finished flow sft: 1 iterations (0 replayed), 2 tasks (0 cached, 1 failed) "
        "in 2s",
    ]


def test_live_panel_shows_the_running_task():
    p, out, clock = _progress(live=True)
    with p:
        p.start_run("abc", "grpo", total_iterations=2)
        p.task_started("iter-0000/generate")
        clock.now += 3
        assert p.status_line() == ("[run abc] grpo iter-0000/generate running 3s "
                                   "(1/2 iterations, elapsed 3s)")
        p.task_finished("iter-0000/generate", 3.0)
        assert p.status_line() == "[run abc] grpo (1/2 iterations, elapsed 3s)"
    text = out.getvalue()
    assert "[run abc] iter-0000/generate done in 3.0s (1/2 iterations, elapsed 3s)" in text
    assert "finished flow grpo" in text and p._live is None


@pytest.mark.parametrize(("status", "start"), [
    ("FAILED", "[run x] FAILED flow sft: 2 tasks (0 cached, 1 failed)"),
    ("RESUMABLE", "[run x] interrupted flow sft: "),
    ("CANCELED", "[run x] stopped flow sft (canceled, or another driver took over)"),
    ("SLEEPING", "[run x] paused flow sft"),
    (None, "[run x] ended flow sft without a recorded outcome"),
])
def test_only_a_successful_run_is_reported_finished(status, start):
    p, out, clock = _progress()
    p.start_run("x", "sft")
    _step(p, clock, "prepare", 0.5)
    p.task_finished("train", 1.0, status="FAILED")
    p.close(status)
    p.close(status)  # a second close prints nothing more
    last = out.getvalue().splitlines()
    assert last[-1].startswith(start) and "finished" not in last[-1]
    assert last[-2].startswith("[run x] train failed after")
    if status in ("RESUMABLE", None):
        assert last[-1].endswith("`alignflow resume x`")
    if status == "FAILED":  # a config fix is resumed with --set (issue 47, item 12)
        assert last[-1].endswith("`alignflow resume x` (a config value: "
                                 "`alignflow resume x --set KEY=VALUE`)")


def test_gpu_peak_memory_of_a_step_is_shown():
    p, out, clock = _progress()
    p.start_run("abc", "grpo", total_iterations=2)
    record = {"__type__": "alignflow.tasks.steps.records:LearnOutput",
              "fields": {"metrics": {"kl": 0.1, "gpu/actor/peak_allocated_gib": 3.14}}}
    p.task_finished("iter-0000/learn", 2.0, output=record)
    p.task_finished("iter-0000/score", 1.0, output={"metrics": {"reward_mean": 0.5}})
    assert out.getvalue().splitlines()[1:] == [
        "[run abc] iter-0000/learn done in 2.0s, gpu 3.1 GiB (1/2 iterations, elapsed 0s)",
        "[run abc] iter-0000/score done in 1.0s (1/2 iterations, elapsed 0s)"]


def test_no_summary_for_a_run_that_never_started():
    out = io.StringIO()
    Progress(stream=out, live=False).close(None)
    assert out.getvalue() == ""
