"""`alignflow report`: one self-contained HTML page; panels only where the run has data.

`report_store()` commits hand-made runs through the artifacts API (imported by the slow
browser test too): an RL run, a DPO run, an SFT run, a failed run and a run with no rows.
"""

from __future__ import annotations

import base64
import html
import json
import re

import pytest

from alignflow.artifacts.commit import commit
from alignflow.artifacts.parquet_io import write_table
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import render_report
from alignflow.catalog.report.compare import render_comparison

T0 = 1_700_000_000.0
EVIL = "<script>alert('x')</script><img src=x onerror=alert(1)>"
RL_STEPS = ("generate", "score", "reference", "learn", "sync")
CONFIG = {"__type__": "m:RLConfig", "fields": {"seed_note": None, "algo": {
    "__type__": "m:AlgoConfig", "fields": {"eps_clip": 0.2, "kl": {"init_kl_coef": 0.0}}},
    "generate": {"n_samples_per_prompt": 4, "stop": ["</s>"]},
    "async_": {"__type__": "m:AsyncConfig", "fields": {"max_staleness": 1}}}}


def _run_json(store, run_id: str, flow: str, **extra) -> None:
    store.write_json(f"runs/{run_id}/run.json", {
        "format": 1, "run_id": run_id, "flow": flow, "status": "SUCCESSFUL", "seed": 3,
        "created": T0, "ended": T0 + 125.0, "config": CONFIG, "parent_run": None,
        "code": {"git_commit": "0123456789abcdef" * 2 + "01234567",
                 "flow_sha256": "cd" * 32, "flow_file": "/src/flows/grpo.py"}} | extra)


def _rl_iteration(store, run_id: str, it: int, reward_scale: float,
                  evaluated: bool = False) -> None:
    samples = [(p, s) for p in range(2) for s in range(4)]
    rewards = [reward_scale * (it + 1) * (0.5 + 0.2 * s + 0.1 * p) for p, s in samples]
    norm = [r - sum(rewards) / len(rewards) for r in rewards]
    ref = write_table(store, "rollouts", {
        "iteration": [it] * 8, "task_key": [f"iter-{it:04d}/generate"] * 8,
        "prompt_id": [f"p{p}" for p, _ in samples], "sample_idx": [s for _, s in samples],
        "prompt": [f"question {p}?" for p, _ in samples],
        "response": [f"answer {it}.{s} {EVIL if s == 3 else ''}" for _, s in samples],
        "reward": rewards, "kl": [0.01 * it * (1 + s) for _, s in samples],
        "advantages": [[n, n] for n in norm], "returns": [[n, n] for n in norm],
        "response_len": [5 + s + it for _, s in samples]}, run_id=run_id, task="generate",
        partition={"iter": it})
    metrics = {"loss": 1.0 / (it + 1), "entropy": 3.0 - 0.3 * it, "kl": 0.01 * it,
               "kl_coef": 0.0, "lr": 1e-3 * (4 - it), "optimizer_steps": 4.0}
    if evaluated:  # an RL evaluation's metrics (tasks/rl/evaluate.py)
        metrics |= {"eval/default/pass1": 0.2 + 0.1 * it, "eval/default/pass4": 0.5 + 0.1 * it,
                    "eval/num_samples": 8.0}
    mref = write_table(store, "metrics", {"task_key": [f"iter-{it:04d}/learn"] * len(metrics),
                                          "step": [it] * len(metrics), "key": list(metrics),
                                          "value": list(metrics.values()),
                                          "ts": [T0] * len(metrics)},
                       run_id=run_id, task="learn", partition={"iter": it})
    for n, step in enumerate(RL_STEPS):
        arts = {"generate": [ref], "learn": [mref]}.get(step, [])
        start = T0 + 10 * it + 2 * n
        commit(store, run_id, f"iter-{it:04d}/{step}", {
            "artifacts": arts, "started": start, "ended": start + 0.5 + n * 0.3, "task": step})


def _offline(store, run_id: str, table: str) -> None:
    for step in range(1, 7):
        if table == "preferences":
            rows = {"step": [step] * 4, "pair_id": [f"q{i}" for i in range(4)],
                    "prompt": [f"Q{i}" for i in range(4)], "chosen": ["yes"] * 4,
                    "rejected": [f"no {EVIL}"] * 4,
                    "chosen_score": [0.1 * step + 0.01 * i for i in range(4)],
                    "rejected_score": [-0.05 * step - 0.02 * i for i in range(4)],
                    "margin": [0.15 * step + 0.03 * i - 0.2 for i in range(4)],
                    "loss": [0.7 / step + 0.01 * i for i in range(4)]}
        else:
            rows = {"step": [step] * 4, "sample_id": [f"s{i}" for i in range(4)],
                    "prompt": ["P"] * 4, "response": ["R"] * 4, "n_tokens": [10 + i for i in range(4)],
                    "loss": [3.0 / step + 0.1 * i for i in range(4)]}
        ref = write_table(store, table, rows, run_id=run_id, task="train",
                          task_key=f"train-{step:04d}")
        mref = write_table(store, "metrics", {
            "task_key": [f"train-{step:04d}"] * 2, "step": [step, step],
            "key": ["train/loss", "train/grad_norm"], "value": [0.7 / step, 1.0 + step % 3],
            "ts": [T0, T0]}, run_id=run_id, task="train")
        commit(store, run_id, f"train-{step:04d}", {"artifacts": [ref, mref], "task": "train",
                                                    "started": T0 + step, "ended": T0 + step + 1})


def report_store(store) -> None:
    """rl (4 iterations), dpo and sft (6 steps), failed (rl, error text), empty (no rows)."""
    _run_json(store, "rl", "grpo")
    for it in range(4):
        _rl_iteration(store, "rl", it, 0.1, evaluated=True)
    _run_json(store, "dpo", "dpo", active=60.0)  # drivers ran 60 s of its 125 s
    _offline(store, "dpo", "preferences")
    _run_json(store, "sft", "sft")
    _offline(store, "sft", "sft_samples")
    other = json.loads(json.dumps(CONFIG).replace('"eps_clip": 0.2', '"eps_clip": 0.3'))
    _run_json(store, "failed", "grpo", status="FAILED", error=f"loss is NaN {EVIL}",
              config=other)
    for it in range(2):
        _rl_iteration(store, "failed", it, 0.0)  # every reward 0: a constant
    _run_json(store, "empty", "ppo", status="RUNNING", ended=None)
    _run_json(store, "idpo", "iterative_dpo")
    _offline(store, "idpo", "preferences")
    pairs = write_table(store, "preferences", {  # a round's selected pairs: no training step
        "round": [0] * 2, "pair_id": ["a", "b"], "prompt": ["P"] * 2, "chosen": ["y"] * 2,
        "rejected": ["n"] * 2, "margin": [0.5, 0.7]}, run_id="idpo", task="pairs",
        task_key="round-0000/pairs")
    commit(store, "idpo", "round-0000/pairs", {"artifacts": [pairs], "task": "pairs"})


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    from alignflow.artifacts.store import Store

    store = Store.open(str(tmp_path_factory.mktemp("report") / "store"))
    report_store(store)
    with Catalog(store) as cat:
        pages = {rid: render_report(cat, rid)
                 for rid in ("rl", "dpo", "sft", "failed", "empty", "idpo")}
        pages["rl vs failed"] = render_comparison(cat, ["rl", "failed"])
        return pages


def titles(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def alts(page: str) -> list[str]:
    found = re.findall(r'<img src="data:image/png;base64,[^"]+" alt="([^"]*)">', page)
    return [html.unescape(a) for a in found]


def test_rl_panels(pages):
    page = pages["rl"]
    assert titles(page) == ["Run", "Learning curves", "Reward: first vs last iteration",
                            "Evaluation", "Where the time went", "Other metrics",
                            "Best and worst samples", "Config"]
    assert "eval/default/pass1, eval/default/pass4" in alts(page)
    # no return curve (it is the group-normalised advantage), the learn step's kl is the
    # same KL, kl_coef is constant, optimizer_steps a counter
    assert alts(page)[0] == "reward, KL, response length (tokens), entropy, policy loss"
    assert alts(page)[4] == "train/lr"
    metrics = page[page.index("<h2>Other metrics</h2>"):page.index("<h2>Best and worst")]
    assert "kl_coef" not in metrics and "optimizer_steps" not in metrics
    assert "train/lr" in metrics  # the old run's `lr` row, named in the one namespace
    for step in RL_STEPS:
        assert f"<td>{step}</td>" in page or f'<span class="t">{step}</span>' in page


def test_offline_panels(pages):
    assert titles(pages["dpo"]) == ["Run", "Learning curves", "Margin: first vs last step",
                                    "Where the time went", "Other metrics",
                                    "Hardest examples of the last step", "Config"]
    assert alts(pages["dpo"])[0] == ("loss, margin (chosen − rejected), accuracy (margin > 0), "
                                     "chosen score, rejected score")
    assert alts(pages["dpo"])[2] == "train/grad_norm"  # train/loss is the loss curve already
    assert titles(pages["sft"]) == ["Run", "Learning curves", "Where the time went",
                                    "Other metrics", "Hardest examples of the last step",
                                    "Config"]
    assert alts(pages["sft"])[0] == "loss, tokens per sample"


def test_iterative_dpo_pairs_without_a_step_are_left_out_of_per_step_curves(pages):
    assert titles(pages["idpo"])[:3] == ["Run", "Learning curves", "Margin: first vs last step"]


def test_constant_and_empty_panels_are_left_out(pages):
    # every reward 0: no reward curve, no histogram, but said; samples are still listed
    assert "Reward: first vs last" not in pages["failed"]
    assert not alts(pages["failed"])[0].startswith("reward")
    assert "reward: constant 0" in pages["failed"]
    assert titles(pages["empty"]) == ["Run", "Config"]
    assert "so far" in pages["empty"]  # a running run shows how long it has run


def test_store_text_is_escaped_and_the_page_runs_nothing(pages):
    for page in pages.values():
        assert "<script" not in page and "onerror=alert" not in page.replace(
            "onerror=alert(1)&gt;", "")
        assert "Content-Security-Policy" in page and "default-src 'none'; img-src data:" in page
        assert "http://" not in page and "https://" not in page  # nothing loaded from outside
    assert "error: loss is NaN &lt;script&gt;" in pages["failed"]
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in pages["rl"]


def test_images_are_png_data(pages):
    for page in pages.values():
        for data in re.findall(r'src="data:image/png;base64,([^"]+)"', page):
            png = base64.b64decode(data)
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_overview_facts(pages):
    page = pages["rl"]
    assert '<span class="badge successful">SUCCESSFUL</span>' in page
    assert "2023-11-14 22:13:20 UTC" in page and "2m 05s" in page
    assert '<span title="0123456789abcdef0123456789abcdef01234567">0123456789ab</span>' in page
    assert "grpo.py · sha256 cdcdcdcdcdcd" in page
    assert "20 successful" in page
    assert "algo.kl.init_kl_coef" in page and "generate.stop" in page


def test_time_config_keys_and_axes_read_as_they_are(pages):
    page = pages["rl"]
    assert "start-up (run start → first task)" in page  # not only the task bodies
    assert "async.max_staleness" in page and "async_" not in page  # keys as users spell them
    assert "1m 00s" in pages["dpo"] and "2m 05s" not in pages["dpo"]  # not while interrupted
    for page in pages.values():
        assert len(titles(page)) == len(set(titles(page)))


def test_runs_compared_on_the_same_axes_with_their_config_differences(pages):
    page = pages["rl vs failed"]
    assert titles(page) == ["Runs", "Curves", "Config differences"]
    assert alts(page)[0].startswith("reward, ")  # one plot per quantity, a line per run
    assert "1 of 6 keys differ" in page
    diff = page[page.index("<h2>Config differences</h2>"):]
    assert "algo.eps_clip" in diff and "0.3" in diff and "generate.stop" not in diff


def test_a_flat_curve_is_drawn_flat():
    from alignflow.catalog.report.plots import MIN_SPAN, y_limits

    lo, hi = y_limits([0.6931, 0.6929, 0.6927])  # a DPO loss that barely moves
    assert hi - lo == pytest.approx(MIN_SPAN * 0.6931)
    assert y_limits([0.0, 0.5, 1.0]) is None and y_limits([0.0, 0.0]) is None


def test_failed_run_shows_its_error_first(pages):
    page = pages["failed"]
    assert page.index('class="alert"') < page.index("<dl")
    assert '<span class="badge failed">FAILED</span>' in page
