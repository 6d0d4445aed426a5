"""`--executor auto` reads the run's plan: a run that fits one process runs in it; anything
that needs more processes (a cluster, GPUs, data-parallel roles, separate hosts, a
generator worker, DeepSpeed, vLLM engines, a user flow) gets Ray — and the choice lands in
the run's record. (Ported from the tests of `flows/executor_choice.py`, which the plan
replaced.)"""

from __future__ import annotations

import json

import pytest

from alignflow.cli import main
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.control import planning
from alignflow.tasks.plan import cluster


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    monkeypatch.setattr(cluster, "visible_gpus", lambda: 0)


def choose(flow: str, *sets: str, address: str | None = None) -> tuple[str, str]:
    checked = check_run(flow, None, list(sets), [], check=False)
    return planning.resolve("auto", address, checked.config, checked.plan)


@pytest.mark.parametrize("flow", ["sft", "dpo", "rm", "grpo", "ppo"])
def test_single_process_runs_stay_in_this_process(flow):
    assert choose(flow)[0] == "inline"


@pytest.mark.parametrize(("flow", "sets", "why"), [
    ("sft", ["placement.num_gpus_per_node=2"], "2 workers per role"),
    ("sft", ["ds.zero_stage=2"], "DeepSpeed"),
    ("sft", ["placement.num_gpus=1"], "placement.num_gpus"),
    ("grpo", ["actor.num_gpus_per_node=2"], "2 workers per role"),
    ("grpo", ["async.max_staleness=1", "rollout.max_new_tokens=8"], "worker of its own"),
    ("grpo", ["train.colocate_actor_ref=true"], "separate hosts"),
    ("grpo", ["rollout.engine=vllm"], "vLLM"),
])
def test_runs_that_need_more_processes_get_ray(flow, sets, why):
    executor, reason = choose(flow, *sets)
    assert executor == "ray" and why in reason, reason


def test_a_named_cluster_or_a_gpu_gets_ray(monkeypatch):
    assert choose("sft", address="ray://head:10001") == ("ray", "a Ray cluster is named "
                                                                "(--address)")
    monkeypatch.setattr(cluster, "visible_gpus", lambda: 1)
    assert "GPUs" in choose("sft")[1]


def test_flows_that_are_not_built_in_get_ray():
    assert choose("tests/flows_for_tests.py:steps", "n=1")[0] == "ray"
    assert planning.resolve("auto", None, {"n": 1})[0] == "ray"


def test_an_executor_named_is_kept():
    assert planning.resolve("ray", None, None) == ("ray", "")
    assert planning.resolve("inline", "ray://x:1", None) == ("inline", "")


def test_hidden_gpus_do_not_count(monkeypatch):
    monkeypatch.undo()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cluster.visible_gpus() == 0 and cluster.Cluster.local().gpus == 0


def test_the_cli_records_the_executor_it_chose(tmp_path, capsys, tiny_model_dir):
    data, store = tmp_path / "sft.jsonl", tmp_path / "store"
    data.write_text("".join(json.dumps({"input": f"q{i}", "output": f"a{i}"}) + "\n"
                            for i in range(4)))
    sets = [f"model.model_name_or_path={tiny_model_dir}", f"data.dataset={data}",
            "data.input_key=input", "data.output_key=output", "data.apply_chat_template=false",
            "data.max_len=32", "train.batch_size=2", "train.micro_batch_size=2",
            "train.max_steps=1", "num_threads=1"]
    code = main(["run", "sft", "--store", str(store), "--run-id", "a",
                 *[arg for s in sets for arg in ("--set", s)]])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "running in this process" in err
    meta = json.loads((store / "runs" / "a" / "run.json").read_text())
    assert meta["executor"] == "inline"


def test_the_dry_run_says_which_executor_and_why(capsys):
    assert main(["run", "sft", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("executor: inline (one process is "
                                                        "enough; --executor ray runs it on Ray)")
    assert main(["run", "sft", "--dry-run", "--set", "ds.zero_stage=2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("executor: ray (DeepSpeed trains in "
                                                        "worker processes)")


def test_the_dry_run_shows_the_plan(capsys):
    assert main(["run", "ppo", "--dry-run", "--set", "train.colocate_all=false",
                 "--set", "algo.kl.init_coef=0"]) == 0  # no reference model
    out = capsys.readouterr().out.splitlines()
    table = out[out.index(next(line for line in out if line.startswith("plan: "))):]
    assert table[1].split() == ["host", "roles", "workers", "GPUs/CPUs", "per", "worker",
                                "trainer", "engine", "placement"]
    rows = {line.split()[0]: line for line in table[2:5]}
    assert rows["actor"].split()[1:] == ["actor", "1×1", "0", "/", "1", "torch", "hf",
                                         "in-process", "Ray", "actor"]
    assert "- (no model)" in rows["reward"] and "critic" in rows
    assert out[-1] == "executor: ray (roles are placed on separate hosts (train.colocate_*))"
