"""What a run's plan asks of the machine is checked before anything starts: vLLM installed,
a model whose head size vLLM serves (the tiny model's 16 passed --dry-run, then failed
inside vLLM), the CPUs Ray actors reserve (engines waited silently for 15 minutes); and a
wait on engines says what it waits for, every few seconds."""

from __future__ import annotations

import importlib
import importlib.util
import types

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run

BASE = ["--actor.model_name_or_path", "tiny-llama", "--rollout.n_samples_per_prompt", "2"]


def _refusal(*flags: str) -> str:
    with pytest.raises(ConfigError) as info:
        check_run("grpo", None, [], [*BASE, *flags])
    return str(info.value)


def test_vllm_missing_is_said_before_the_run(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "vllm" else _REAL(name, *a))
    assert "rollout.engine=vllm: vLLM is not installed" in _refusal("--rollout.engine", "vllm")


def test_a_head_size_vllm_does_not_serve_is_refused(monkeypatch, tiny_model_dir):
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "vllm" else _REAL(name, *a))
    line = _refusal("--rollout.engine", "vllm")
    assert "has attention head size 16; vLLM's CPU build serves 32, 64" in line
    assert "expected rollout.engine=hf" in line


def test_cpus_the_actors_reserve_must_fit(monkeypatch):
    from alignflow.tasks.plan.cluster import Cluster

    monkeypatch.setattr(Cluster, "local", classmethod(lambda cls: cls(cpus_per_node=2.0)))
    apart = ["--train.colocate_all", "false"]  # hosts actor (a warm pool process), ref, reward
    assert check_run("grpo", None, [], [*BASE, *apart]).plan.executor == "ray"  # 0 + 1 + 1
    line = _refusal(*apart, "--placement.num_cpus", "2")
    assert line == ("the run's plan reserves 4 CPUs (host ref 1 × 2, host reward 1 × 2); the "
                    "cluster has 2, so Ray would wait for them; expected fewer "
                    "vllm.num_engines or workers, or placement.num_cpus lower")


def test_a_long_wait_says_what_it_waits_for(monkeypatch, capsys):
    from alignflow.tasks.engines.vllm import placement as vllm_placement

    clock = iter(range(0, 1000, 4))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    monkeypatch.setitem(__import__("sys").modules, "ray", types.SimpleNamespace(
        wait=lambda refs, num_returns, timeout: ([], refs)))
    assert vllm_placement.wait_said(["a", "b"], 30.0, lambda n: f"{n} of 2 engines up") == []
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("alignflow: 0 of 2 engines up; 8s of 30s (vllm.startup_timeout_s / "
                        "vllm.generate_timeout_s)")
    assert len(lines) >= 2


_REAL = importlib.util.find_spec
