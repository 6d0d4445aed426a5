"""The memory plan every run's plan carries (issue 42): refused only where every size is
known (the GPU's given, each model's config.json read); a model whose size could not be
read makes the table say "unknown" and refuses nothing."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.rl.config import RLConfig
from alignflow.tasks.plan.cluster import Cluster

SMALL = 256 << 20  # below the 0.5 GiB CUDA context alone: every GPU is over


def _plan(model: str, gpu_memory: int | None):
    cfg = load_config(RLConfig, sets=[f"actor.model_name_or_path={model}"])
    return cfg.run_plan(Cluster(gpus_per_node=4, cpus_per_node=None, described=True,
                                gpu_memory=gpu_memory))


def test_known_sizes_are_recorded_and_refused(tiny_model_dir):
    plan = _plan(str(tiny_model_dir), SMALL)
    assert plan.memory is not None and plan.memory.gpus and not plan.memory.unknown
    with pytest.raises(ConfigError, match=r"^GPU memory: .* over the 0\.2 GiB of each GPU"):
        plan.check_fits()


def test_an_assumed_gpu_size_is_said_not_refused(tiny_model_dir):
    plan = _plan(str(tiny_model_dir), None)
    assert plan.memory is not None and plan.memory.assumed
    plan.check_fits()


def test_an_unread_model_size_is_unknown_and_refuses_nothing(tmp_path):
    plan = _plan(str(tmp_path / "no-such-model"), SMALL)
    memory = plan.memory
    assert memory is not None and memory.unknown and memory.problem() is None
    assert memory.table()[0].startswith("memory: unknown (the size of actor: ")
    plan.check_fits()


def test_a_plan_without_gpus_reads_no_config(monkeypatch, tiny_model_dir):
    cfg = load_config(RLConfig, sets=[f"actor.model_name_or_path={tiny_model_dir}"])
    monkeypatch.setattr(type(cfg), "_memory", lambda self: pytest.fail("read on the CPU"))
    assert cfg.run_plan(Cluster(gpus_per_node=0)).memory is None
