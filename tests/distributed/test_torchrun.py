"""DeepSpeedTrainer under torchrun: 2 ranks at ZeRO-3 resume bitwise from per-rank optimizer
shards; a world of one refuses that checkpoint's optimizer state and loads its weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("deepspeed")

from safetensors.torch import load_file

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.tasks.distributed.group import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(model_dir, store_dir, mode: str) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           str(ROOT / "tests/distributed/torchrun_resume.py"), str(model_dir), str(store_dir), mode]
    env = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
           "HOME": str(Path.home()), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_ranks_resume_bitwise_and_world_size_is_checked(tiny_model_dir, tmp_path):
    _torchrun(tiny_model_dir, tmp_path, "straight,first")
    _torchrun(tiny_model_dir, tmp_path, "resumed")
    straight, resumed = (load_file(tmp_path / f"{m}.safetensors") for m in ("straight", "resumed"))
    first = load_file(tmp_path / "first.safetensors")
    assert any(not torch.equal(first[k], straight[k]) for k in straight)
    for name, p in straight.items():
        assert torch.equal(resumed[name], p), name
    assert sorted(p.name for p in (tmp_path / "ck" / "ranks").iterdir()) == [
        "rank-00000", "rank-00001"]

    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    alone = DeepSpeedTrainer(load_causal_lm(str(tiny_model_dir)), TrainerConfig(total_steps=4),
                             DSConfig(zero_stage=3))
    store = Store.open(str(tmp_path))
    with pytest.raises(ConfigError, match="saved with world_size=2, this trainer has world_size=1"):
        alone.restore(store, "ck")
    alone.restore(store, "ck", optimizer=False)
    assert alone.global_step == 2
    for name, p in dict(alone.state_dict_for_sync()).items():
        assert torch.equal(p, first[name]), name
