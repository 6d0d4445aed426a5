"""An engine is hung when it stops making progress, never because a generate is long
(issue 41, item 7: `tasks/engines/vllm/liveness.py`). Time is a fake clock the test moves:
a generate on the HF stand-in that runs four times the liveness window but keeps producing
finishes; one that stops producing is declared hung within the window (and one round of
polling); the counts the engines keep (HF tokens and finished sequences, vLLM's progress
bar and sampler rows) grow as they produce."""

from __future__ import annotations

import threading

import pytest
import torch

from alignflow.tasks.engines import standin
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm import liveness
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.engines.vllm.progress import Finished
from alignflow.tasks.engines.vllm.worker import Sampled, UntruncatedLogprobs
from alignflow.tasks.simulate import node

WINDOW = 5.0  # fake seconds without progress before an engine counts as hung
NO_EOS = SamplingParams(max_new_tokens=24, n=2, seed=3, eos_token_ids=(10_000,))
PROMPTS = [[5, 6, 7], [8, 9]]  # × n=2: four rows, two micro-batches of two


class Clock:
    """A fake monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def engine(tiny_model_dir, monkeypatch) -> standin.HFStandIn:
    monkeypatch.setenv(node.ENV_NODE, "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    config = VLLMSection(max_num_seqs=2).engine_config(dtype="fp32", on_gpu=True,
                                                       colocated=False)
    return standin.HFStandIn(str(tiny_model_dir), config)


def _each_step(engine: standin.HFStandIn, before_step) -> None:
    """Runs `before_step()` before each forward of the engine's model (a decode step)."""
    model, forward = engine.hf.model, engine.hf.model.forward

    def step(*args, **kwargs):
        before_step()
        return forward(*args, **kwargs)
    model.forward = step


def _watched(engine: standin.HFStandIn, clock: Clock, hung: threading.Event):
    """A generate in a thread, watched by `wait_alive` as the engine host watches one:
    asked its progress every round, the round waiting a moment of real time for the call
    to be over. Fake time passes with the engine's steps, and once it hangs (`hung`) one
    second per round, so how fast this machine runs the model never matters."""
    thread = threading.Thread(target=engine.generate, args=(PROMPTS, NO_EOS))

    def wait(pending: list, seconds: float) -> set:
        thread.join(timeout=0.005)
        clock.now += 1.0 if hung.is_set() else 0.0
        return set() if thread.is_alive() else set(pending)

    thread.start()
    over, hung = liveness.wait_alive([0], WINDOW, wait=wait, clock=clock,
                                     ask=lambda keys: {0: engine.progress()})
    return thread, over, hung, clock.now


def test_a_generate_four_windows_long_that_keeps_producing_finishes(engine):
    clock = Clock()
    _each_step(engine, lambda: setattr(clock, "now", clock.now + 1.0))  # 1 s per step
    thread, over, hung, took = _watched(engine, clock, threading.Event())
    thread.join()
    assert (over, hung) == ({0}, set())
    assert took >= 2 * NO_EOS.max_new_tokens > 4 * WINDOW  # the old deadline: WINDOW
    assert engine.progress() == 4 * NO_EOS.max_new_tokens  # four rows, no EOS


def test_a_generate_that_stops_producing_is_hung_within_the_window(engine):
    clock, hanging, released, steps = Clock(), threading.Event(), threading.Event(), []

    def step() -> None:
        clock.now += 1.0
        steps.append(clock.now)
        if len(steps) == 4:  # three steps, then the engine hangs until the test lets go
            hanging.set()
            released.wait()
    _each_step(engine, step)
    thread, over, hung, seen_hung = _watched(engine, clock, hanging)
    released.set()
    thread.join()
    assert (over, hung) == (set(), {0})
    # after its last step's tokens (between steps 3 and 4): a round to see them, a window
    # of quiet, a round to see the window passed
    assert WINDOW - 1.0 < seen_hung - steps[3] <= WINDOW + 2.0


def test_the_watch_names_the_quiet_engine_and_keeps_the_busy_one():
    """Scripted engines: 0 counts up every round and is over at 40 s; 1 stops at 12 s;
    2 never answers. Rounds are `POLL_S` apart."""
    clock = Clock()
    counts = {0: lambda t: int(t), 1: lambda t: int(min(t, 12.0))}

    def wait(pending: list, seconds: float) -> set:
        clock.now += seconds
        return {0} if clock.now >= 40.0 and 0 in pending else set()

    over, hung = liveness.wait_alive([0, 1, 2], WINDOW, wait=wait, clock=clock, ask=lambda keys: {
        k: counts[k](clock.now) for k in keys if k in counts})
    assert (over, hung) == ({0}, {1, 2})


def test_the_engines_count_what_they_produce(tiny_model_dir):
    hf = HFEngine.from_pretrained(str(tiny_model_dir), micro_rollout_batch_size=2)
    out = hf.generate(PROMPTS, SamplingParams(max_new_tokens=6, n=2, seed=1))
    assert hf.progress() == sum(len(s.response_ids) + (s.finish_reason == "stop") for s in out)
    finished = Finished()  # vLLM's progress bar, as `LLM.generate` drives it
    assert list(finished.bar([1, 2, 3], desc="Adding requests")) == [1, 2, 3]
    bar = finished.bar(total=3, desc="Processed prompts", dynamic_ncols=True, postfix="")
    bar.update(2)
    bar.postfix = f"{2 / max(bar.format_dict['elapsed'], 1e-9):.2f} toks/s"
    bar.close()
    assert finished.n == 2


class Argmax(torch.nn.Module):
    """vLLM's top-k/top-p sampler, as far as the wrapper calls it."""

    def forward(self, logits, generators, k, p):
        return logits.argmax(-1), None


def test_the_vllm_sampler_counts_its_rows():
    before = Sampled.rows
    UntruncatedLogprobs(Argmax())(torch.zeros(3, 5), {}, None, None)
    assert Sampled.rows - before == 3
