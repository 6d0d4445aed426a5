"""RL evaluation's metrics against OpenRLHF v0.11.0 `trainer/ppo_trainer.py`
`compute_eval_metrics` (per data source: pass<n> = mean over prompts of the best of n
rewards, pass1 = of their mean; lengths and truncation per source and overall), and the
best-checkpoint metric as its `_detect_eval_metric_key` picks it."""

from __future__ import annotations

import pytest

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.rl.eval_config import best_key
from alignflow.tasks.rl.evaluate import eval_metrics


def openrlhf_eval_metrics(sources, rewards, lengths, truncated, n):
    metrics = {}
    for i in range(len(rewards) // n):
        ds = sources[i * n]
        m = metrics.setdefault(ds, {f"pass{n}": 0, "pass1": 0, "count": 0, "lengths": [],
                                    "truncated": []})
        chunk = rewards[i * n:(i + 1) * n]
        if n > 1:
            m[f"pass{n}"] += max(chunk)
        m["pass1"] += sum(chunk) / n
        m["count"] += 1
        m["lengths"] += lengths[i * n:(i + 1) * n]
        m["truncated"] += truncated[i * n:(i + 1) * n]
    logs = {}
    for ds, m in metrics.items():
        logs[f"eval_{ds}_pass{n}"] = m[f"pass{n}"] / m["count"]
        logs[f"eval_{ds}_pass1"] = m["pass1"] / m["count"]
        logs[f"eval_{ds}_response_length_mean"] = sum(m["lengths"]) / len(m["lengths"])
        logs[f"eval_{ds}_truncated_rate"] = sum(m["truncated"]) / len(m["truncated"])
    logs["eval_response_length_mean"] = sum(lengths) / len(lengths)
    logs["eval_truncated_rate"] = sum(truncated) / len(truncated)
    logs["eval_num_samples"] = float(len(rewards))
    return logs


def _openrlhf_name(key: str) -> str:
    return "eval_" + key[len("eval/"):].replace("/", "_")


@pytest.mark.parametrize("n", [1, 2])
def test_metrics_equal_openrlhfs(n):
    sources = ["math"] * 2 * n + ["code"] * n + ["math"] * n
    rewards = [1.0, 0.0, 0.5, 0.5, 0.0, 1.0, 0.25, 0.75][:4 * n]
    lengths = [3, 5, 7, 2, 9, 4, 6, 8][:4 * n]
    truncated = [False, True, False, False, True, False, False, True][:4 * n]
    ours = eval_metrics(sources, rewards, lengths, truncated, n)
    ref = openrlhf_eval_metrics(sources, rewards, lengths, truncated, n)
    assert {_openrlhf_name(k): v for k, v in ours.items()} == pytest.approx(ref)


def test_two_prompts_by_hand():
    out = eval_metrics(["default"] * 4, [1.0, 0.0, 0.0, 0.0], [2, 4, 6, 8],
                       [False, False, False, True], 2)
    assert out["eval/default/pass1"] == 0.25 and out["eval/default/pass2"] == 0.5
    assert out["eval/truncated_rate"] == 0.25 and out["eval/num_samples"] == 4.0


def test_the_best_metric_as_openrlhf_detects_it():
    measured = {"eval/math/pass1": 0.3, "eval/code/pass1": 0.1, "eval/math/pass4": 0.6}
    assert best_key("", measured) == "eval/code/pass1"  # sorted: eval_code_pass1 first
    assert best_key("eval_math_pass4", measured) == "eval/math/pass4"
    assert best_key("eval/math/pass1", measured) == "eval/math/pass1"
    assert best_key("none", measured) is None and best_key("eval_x_pass1", measured) is None


def test_the_flags_of_every_release():
    flat = ["--eval_dataset", "d.jsonl", "--eval_steps", "2", "--eval_temperature", "0.3",
            "--eval_n_samples_per_prompt", "2", "--eval_split", "test",
            "--best_metric_key", "eval_default_pass1"]
    dotted = ["--eval.dataset", "d.jsonl", "--eval.steps", "2", "--eval.temperature", "0.3",
              "--eval.n_samples_per_prompt", "2", "--eval.split", "test",
              "--ckpt.best_metric_key", "eval_default_pass1"]
    for flags in (flat, dotted):
        cfg = build_config("grpo", None, [], flags)
        assert (cfg.eval.dataset, cfg.eval.steps, cfg.eval.temperature,
                cfg.eval.n_samples_per_prompt, cfg.eval.split, cfg.ckpt.best_metric_key) == (
            "d.jsonl", 2, 0.3, 2, "test", "eval_default_pass1")
    with pytest.raises(Exception, match="eval.steps|steps"):
        build_config("grpo", None, ["eval.steps=0"], [])
