"""The report of a real run (tiny GRPO, inline): the engine's tables and metric keys land in
the panels they belong to, and the page passes the browser check."""

from __future__ import annotations

import re

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import render_report
from alignflow.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from tests.fast.test_catalog_report import alts, titles
from tests.slow.chromium import find_chromium

pytestmark = pytest.mark.slow


def test_report_of_a_real_grpo_run(tiny_model_dir, tmp_path):
    flow, cfg_cls = load_flow("grpo")
    cfg = load_config(cfg_cls, sets=[
        f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=16",
        "train.max_iterations=3", "rollout.batch_size=4", "rollout.n_samples_per_prompt=4",
        "rollout.max_new_tokens=8", "reward.sources=rule:target:e",
        "train.batch_size=16", "train.micro_batch_size=8",
        "actor.adam.lr=1e-2", "actor.lr_warmup_ratio=0", "num_threads=1",
        "algo.kl.init_coef=0.01"])  # a KL term: the reference runs and KL is plotted
    api.run(flow, cfg, store=str(tmp_path / "store"), executor="inline", run_id="g", seed=1)
    with Catalog(str(tmp_path / "store")) as cat:
        html = render_report(cat, "g")
        run = cat.sql("SELECT started, duration, code_version FROM runs").to_pylist()[0]
    assert run["started"] is not None and run["duration"] > 0 and run["code_version"]
    assert titles(html)[:2] == ["Run", "Learning curves"]
    assert {"Where the time went", "Best and worst samples", "Config"} <= set(titles(html))
    curves = alts(html)[0].split(", ")
    assert {"reward", "KL", "entropy", "policy loss"} <= set(curves) and "return" not in curves
    for step in ("generate", "score", "reference", "learn", "sync"):
        assert re.search(rf">{step}\w*<", html), step  # learn runs as learn_actor
    if find_chromium() is not None:
        from tests.slow.test_catalog_report_browser import _check

        (tmp_path / "g.html").write_text(html, encoding="utf-8")
        _check(tmp_path / "g.html", html)
