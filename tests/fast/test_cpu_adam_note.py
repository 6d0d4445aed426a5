"""`ds.adam_offload` says, in one line and before it starts, that DeepSpeedCPUAdam's op is
being built, where (TORCH_EXTENSIONS_DIR) and about how long (issue 21 §3.14); nothing is
said when the op is cached or installed."""

from __future__ import annotations

import pytest

pytest.importorskip("deepspeed")

from alignflow.tasks.trainers import cpu_adam


class Built(Exception):
    """Stands for the JIT build (DeepSpeedCPUAdam's constructor)."""


def test_the_build_is_announced_before_it_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))

    def build(*args, **kwargs):
        assert "building DeepSpeedCPUAdam" in capsys.readouterr().err  # said first
        raise Built
    import deepspeed.ops.adam

    monkeypatch.setattr(deepspeed.ops.adam, "DeepSpeedCPUAdam", build)
    with pytest.raises(Built):
        cpu_adam.cpu_adam([{"params": []}], lr=1e-3)
    note = cpu_adam.build_note()
    assert note == (f"ds.adam_offload: building DeepSpeedCPUAdam's C++ op now, in "
                    f"{tmp_path}/cpu_adam (TORCH_EXTENSIONS_DIR); this takes about a minute, "
                    "once")


def test_a_cached_op_is_not_announced(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    (tmp_path / "cpu_adam").mkdir()
    (tmp_path / "cpu_adam" / "cpu_adam.so").write_bytes(b"")
    assert cpu_adam.build_note() is None


def test_the_deepspeed_trainer_announces_it(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    import deepspeed.ops.adam
    import torch

    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(deepspeed.ops.adam, "DeepSpeedCPUAdam", lambda *a, **k: "adam")
    this = SimpleNamespace(cfg=TrainerConfig(), ds=DSConfig(zero_stage=2, adam_offload=True))
    this._decay_groups = lambda model: DeepSpeedTrainer._decay_groups(this, model)
    assert DeepSpeedTrainer._optimizer(this, torch.nn.Linear(2, 2)) == "adam"
    assert f"in {tmp_path}/cpu_adam (TORCH_EXTENSIONS_DIR)" in capsys.readouterr().err


def test_a_leftover_build_lock_is_named_and_times_out(tmp_path, monkeypatch, capsys):
    """torch's FileBaton (torch/utils/file_baton.py) waits while `<dir>/lock` exists, with
    no limit and no word; a killed build leaves it behind (issue 47, item 19)."""
    (tmp_path / "lock").write_text("")
    monkeypatch.setenv(cpu_adam.LOCK_ENV, "5")
    now = [0.0]

    def pause(seconds: float) -> None:
        now[0] += seconds
    with pytest.raises(cpu_adam.FlowError, match=r"build lock .*lock was still there after 5 s"):
        cpu_adam.wait_for_lock(str(tmp_path), clock=lambda: now[0], pause=pause)
    assert f"waiting for the build lock {tmp_path / 'lock'}" in capsys.readouterr().err

    def released(seconds: float) -> None:
        (tmp_path / "lock").unlink()
    cpu_adam.wait_for_lock(str(tmp_path), clock=lambda: 0.0, pause=released)
    cpu_adam.wait_for_lock(str(tmp_path))  # no lock: nothing said, no wait
