"""RL evaluation (`eval.*`, OpenRLHF's --eval_dataset / --eval_steps): every eval.steps
iterations the policy answers the eval prompts; `eval/*` metrics are in the metrics table
(equal to OpenRLHF's formula over the committed eval samples and rewards), and the best
evaluation's policy is exported — in a synchronous and in an asynchronous run."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from tests.fast.test_rl_eval_metrics import openrlhf_eval_metrics

pytestmark = pytest.mark.slow
EVAL = ["eval.dataset=alignflow:gsm8k", "eval.steps=1", "eval.n_samples_per_prompt=2",
        "data.max_samples=12", "train.max_iterations=2"]


@pytest.mark.parametrize("extra", [[], ["async.max_staleness=1"]], ids=["sync", "async"])
def test_evaluations_are_metrics_and_keep_the_best_policy(rl_sets, tmp_path, extra):
    flow, cls = load_flow("grpo")
    cfg = load_config(cls, sets=[*rl_sets, *EVAL, *extra])
    out = api.run(flow, cfg, store=str(tmp_path), executor="inline", seed=1, run_id="ev")
    cat = Catalog(str(tmp_path))
    for it in (0, 1):
        rows = cat.sql("""
            SELECT s.datasource, s.response_len, s.finish_reason, r.reward
            FROM eval_samples s JOIN eval_scores r USING (run_id, iteration, prompt_id,
                                                            sample_idx)
            WHERE s.run_id = 'ev' AND s.iteration = ? ORDER BY s.prompt_id, s.sample_idx""",
                       [it]).to_pylist()
        assert len(rows) == 12 * 2
        ref = openrlhf_eval_metrics([r["datasource"] for r in rows],
                                    [r["reward"] for r in rows],
                                    [r["response_len"] for r in rows],
                                    [r["finish_reason"] == "length" for r in rows], 2)
        got = {r["key"]: r["value"] for r in cat.sql(
            "SELECT key, value FROM metrics WHERE run_id = 'ev' AND step = ? AND "
            "key LIKE 'eval/%'", [it]).to_pylist()}
        assert {"eval_" + k[5:].replace("/", "_"): v for k, v in got.items()} == \
            pytest.approx(ref, rel=1e-6)
    best = out["best"]
    assert best["metric"] == "eval/default/pass1" and best["path"] == "runs/ev/final/best"
    assert load_file(tmp_path / "runs" / "ev" / "final" / "best" / "model.safetensors")
