"""Distillation on Ray: the teacher is its own worker (actor), the student another."""

from __future__ import annotations

import json

import pytest

from alignflow.artifacts import gc
from alignflow.catalog.catalog import Catalog
from alignflow.flows.control import api
from tests.offline.conftest import run_flow

pytestmark = pytest.mark.slow


def test_distill_on_ray_with_a_teacher_worker(ray_local, base_sets, pairs_file, tmp_path):
    teacher = run_flow("sft", [*base_sets, f"data.dataset={pairs_file}", "train.max_steps=6",
                               "adam.lr=1e-2"], tmp_path, run_id="teacher")
    sets = [*base_sets, f"data.dataset={pairs_file}", "adam.lr=1e-2",
            f"teacher.model_name_or_path={tmp_path / teacher['model']}", "ckpt.save_steps=4",
            "train.max_steps=8", "model.kd_coef=0.8"]
    out = run_flow("distill", sets, tmp_path, run_id="kd-ray", executor="ray")
    assert out["steps"] == 8 and len(out["loss"]) == 2 and out["loss"][1] < out["loss"][0]
    tasks = tmp_path / "runs/kd-ray/tasks"
    workers = {p.stem: json.loads(p.read_text())["worker"] for p in tasks.glob("*.json")}
    assert workers["teacher-0000"] == workers["teacher-0001"] == "teacher"
    assert workers["train-0000"] == workers["train-0001"] == "policy"
    with Catalog(str(tmp_path)) as cat:
        n = cat.sql("SELECT count(*) AS n FROM sft_samples WHERE run_id = 'kd-ray'").to_pylist()
    assert n[0]["n"] == 8 * 8
    # the teacher's logits are listed (as its checkpoint folder): nothing is orphaned
    assert gc.find_orphans(api.open_store(str(tmp_path)), run_id="kd-ray") == []
