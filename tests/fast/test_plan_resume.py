"""The plan in run.json: recorded as plain JSON when a run is first driven, decoded by the
codec's allow-list, compared on resume — a change the checkpoints cannot follow is refused
in one line and changes nothing, one they can follow is said and recorded; a run recorded
before plans existed gets one when it resumes."""

from __future__ import annotations

import dataclasses
import json

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import from_dict, load_config, to_dict
from alignflow.flows.control import api
from alignflow.flows.journal import codec, runs
from alignflow.flows.loader import load_flow
from alignflow.flows.rl.config import PPOConfig, RLConfig
from alignflow.flows.trust.config import decode_config
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.trainers.deepspeed.section import DSConfig


@pytest.fixture
def sft_run(tmp_path, tiny_model_dir):
    """A finished one-step SFT run `a` (inline) and its store folder."""
    data, store = tmp_path / "sft.jsonl", tmp_path / "store"
    data.write_text("".join(json.dumps({"input": f"q{i}", "output": f"a{i}"}) + "\n"
                            for i in range(4)))
    sets = [f"model.model_name_or_path={tiny_model_dir}", f"data.dataset={data}",
            "data.input_key=input", "data.output_key=output", "data.apply_chat_template=false",
            "data.max_len=32", "train.batch_size=2", "train.micro_batch_size=2",
            "train.max_steps=1", "num_threads=1"]
    flow, cls = load_flow("sft")
    api.run(flow, load_config(cls, sets=sets), store=str(store), run_id="a", executor="inline")
    return store


def _meta(store) -> dict:
    return json.loads((store / "runs" / "a" / "run.json").read_text())


def _rewrite_plan(store, change) -> None:
    meta = _meta(store)
    plan = change(codec.decode(meta["plan"]))
    meta["plan"] = None if plan is None else codec.encode(plan)
    if plan is None:
        del meta["plan"]
    (store / "runs" / "a" / "run.json").write_text(json.dumps(meta))


def _trainers(plan: RunPlan, **changes) -> RunPlan:
    host = plan.hosts[0]
    trainer = dataclasses.replace(host.trainers[0], **changes)
    return dataclasses.replace(plan, hosts=(dataclasses.replace(host, trainers=(trainer,)),))


def test_a_resume_the_checkpoints_cannot_follow_is_refused(sft_run):
    _rewrite_plan(sft_run, lambda p: _trainers(p, backend="deepspeed", world_size=2,
                                               ds=DSConfig(zero_stage=2)))
    before = _meta(sft_run)
    with pytest.raises(ConfigError, match=r"^resume of run 'a' refused: .*: model trainer "
                                          r"deepspeed → torch \(its checkpoint was written by "
                                          r"the deepspeed trainer\); start a new run"):
        api.resume("a", store=str(sft_run), rerun_from="export", executor="inline")
    assert _meta(sft_run) == before  # nothing changed: not even the committed export
    assert (sft_run / "runs" / "a" / "tasks" / "export.json").exists()


def test_the_plan_round_trips_and_a_change_the_checkpoints_follow_is_noted(sft_run, capsys):
    recorded = codec.decode(json.loads(json.dumps(_meta(sft_run)["plan"])))
    assert isinstance(recorded, RunPlan) and recorded.executor == "inline"
    assert recorded.hosts[0].name == "policy" and recorded.hosts[0].trainers[0].backend == "torch"
    assert codec.encode(recorded) == _meta(sft_run)["plan"]
    _rewrite_plan(sft_run, lambda p: dataclasses.replace(
        p, hosts=(dataclasses.replace(p.hosts[0], cpus_per_worker=4.0),)))
    api.resume("a", store=str(sft_run), rerun_from="export", executor="inline")
    assert "note: run a resumes on another plan: host policy: CPUs per worker 4 → 1" in \
        capsys.readouterr().err
    meta = _meta(sft_run)
    assert meta["status"] == runs.SUCCESSFUL
    assert codec.decode(meta["plan"]).hosts[0].cpus_per_worker == 1.0


def test_a_run_recorded_before_plans_resumes_and_gets_one(sft_run):
    _rewrite_plan(sft_run, lambda p: None)
    assert "plan" not in _meta(sft_run)
    api.resume("a", store=str(sft_run), rerun_from="export", executor="inline")
    assert isinstance(codec.decode(_meta(sft_run)["plan"]), RunPlan)


def _plan(cls, *sets: str) -> RunPlan:
    return load_config(cls, sets=list(sets)).run_plan(Cluster(cpus_per_node=8))


@pytest.mark.parametrize(("recorded", "now", "refusal"), [
    (("ds.zero_stage=2", "actor.num_gpus_per_node=2"), ("ds.zero_stage=2",),
     "actor DeepSpeed world size 2 → 1"),
    (("ds.zero_stage=2",), ("ds.zero_stage=3",), "ZeRO stage 2 → 3"),
    (("ds.lora.rank=8",), (), "actor LoRA rank 8 → 0"),
    (("train.colocate_all=false",), (), "actor moved from host actor to models"),
    ((), ("ds.trainer=deepspeed",), "actor trainer torch → deepspeed"),
])
def test_what_a_checkpoint_cannot_follow(recorded, now, refusal):
    with pytest.raises(ConfigError, match=refusal):
        _plan(PPOConfig, *now).follow(_plan(PPOConfig, *recorded))


def test_what_a_checkpoint_follows_is_said():
    assert _plan(RLConfig).follow(_plan(RLConfig)) == []
    notes = _plan(RLConfig, "rollout.engine=vllm", "vllm.num_engines=3").follow(
        _plan(RLConfig, "rollout.engine=vllm", "vllm.num_engines=2"))
    assert notes == ["vLLM engines: 2 × tp1 (0 GPU each) → 3 × tp1 (0 GPU each)"]
    notes = _plan(RLConfig, "actor.num_gpus_per_node=2").follow(_plan(RLConfig))
    assert notes == ["actor trains on 2 worker(s), was 1 (every rank loads the full weights "
                     "and optimizer)"]



def _changed(store, **changes):
    """The run's stored config with `changes` (dotted keys, `__` for `.`): what a re-run of
    its command with other flags gives."""
    _flow, cls = load_flow("sft")
    data = to_dict(decode_config(_meta(store), cls))
    for key, value in changes.items():
        *path, leaf = key.split("__")
        node = data
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return from_dict(cls, data)

def test_a_resume_with_a_changed_config_follows_what_it_can(sft_run, capsys):
    new = _changed(sft_run, adam__lr=3e-4, logger__logging_steps=2)
    api.resume("a", store=str(sft_run), rerun_from="export", executor="inline", config=new)
    assert "note: run a continues with the config given now: adam.lr 5e-06 → 0.0003, " \
        "logger.logging_steps 1 → 2" in capsys.readouterr().err
    stored = _meta(sft_run)["config"]["fields"]
    assert stored["adam"]["fields"]["lr"] == 3e-4  # recorded: the next resume keeps it


def test_a_resume_refuses_each_key_the_run_cannot_follow_and_changes_nothing(sft_run):
    before = _meta(sft_run)
    new = _changed(sft_run, train__max_steps=2, ds__zero_stage=2, adam__lr=3e-4)
    with pytest.raises(ConfigError) as info:
        api.resume("a", store=str(sft_run), rerun_from="export", executor="inline", config=new)
    line = str(info.value)
    assert line.startswith("resume of run 'a' refused: config keys changed that the run cannot "
                           "follow: ds.zero_stage None → 2 (model trainer torch → deepspeed "
                           "(its checkpoint was written by the torch trainer)); ")
    assert "train.max_steps 1 → 2 (task 'plan' used it and is committed)" in line
    assert "adam.lr" not in line and "\n" not in line
    assert _meta(sft_run) == before
