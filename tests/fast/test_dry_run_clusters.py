"""`alignflow run FLOW ... --dry-run --cluster NxG`: the plan for a cluster this machine is
not, and whether it fits — for the examples in `examples/`, OpenRLHF's launch scripts
(v0.9's and 0.11's fixtures, and the hybrid-engine scripts of OpenRLHF's `examples/scripts`
as of v0.10.4-0.11, the release fixtures) at 1×8 and 2×8, and oversized
configs, refused in one line naming the numbers. No Ray, no GPU, no vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignflow.artifacts.shared import ENV as SHARED_ENV
from alignflow.cli import main
from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.compat.script import read_launch
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster
from tests.openrlhf_launch import RELEASES, SCRIPTS, places, swapped

ROOT = Path(__file__).resolve().parents[2]
# features of the current scripts alignflow refuses (compat's gaps table), not placement:
# dropped so the rest of each script is planned as written
UNSUPPORTED = {"--train.dynamic_batch_enable": 0, "--train.max_tokens_per_gpu": 1,
               "--eval.temperature": 1,
               "--rollout.max_tokens_per_gpu": 1, "--eval.dataset": 1, "--eval.steps": 1,
               "--reward.stop_properly_penalty_coef": 1, "--ds.ring_attn_size": 1,
               "--ds.ring_attn_head_stride": 1}
# script -> (GPUs the run takes, hybrid engines in actors (planned, not yet placed))
SCRIPT_PLANS = {
    SCRIPTS / "01_ppo_gae_rm_flat.sh": (6, False),  # actor+ref 2, critic+reward 2, 2 engines
    SCRIPTS / "02_grpo_rule_reward_flat.sh": (8, True),  # 8 workers, 4 engines × tp2 within
    SCRIPTS / "21_ppo_gae_rm_dotted.sh": (6, False),
    SCRIPTS / "22_grpo_rule_reward_dotted.sh": (8, True),
    RELEASES / "train_ppo_ray_hybrid_engine@v0.10.4.sh": (8, True),
    RELEASES / "train_dapo_ray_hybrid_engine@v0.10.4.sh": (8, True),  # GRPO (group_norm), DAPO knobs
    RELEASES / "train_prorlv2_math_hybrid_engine@v0.10.4.sh": (8, False),  # 8 engines tp1: one each
    RELEASES / "train_reinforce_baseline_hybrid_engine@v0.10.4.sh": (4, True),
}
EXAMPLES = {"dpo_champ_smollm2.yaml": "dpo", "sft_gsm8k_smollm2.yaml": "sft",
            "iterative_dpo_gsm8k.yaml": "iterative_dpo",
            "rejection_sampling_gsm8k.yaml": "rejection_sampling"}


@pytest.fixture(autouse=True)
def no_vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)


@pytest.fixture(scope="module")
def where(tmp_path_factory, tiny_model_dir, tiny_rm_dir):
    return places(tmp_path_factory.mktemp("openrlhf"), tiny_model_dir)


def _flags(script: Path, where: dict) -> tuple[str, list[str]]:
    launch = read_launch(script.read_text(), env={})
    flags, out, i = swapped(launch, where), [], 0
    while i < len(flags):
        skip = UNSUPPORTED.get(flags[i].partition("=")[0])
        if skip is None:
            out.append(flags[i])
        elif "=" not in flags[i] and skip:
            i += 1
        i += 1
    return launch.flow, out


@pytest.mark.parametrize("spec", ["1x8", "2x8"])
@pytest.mark.parametrize("script", sorted(SCRIPT_PLANS), ids=lambda p: p.name)
def test_openrlhf_scripts_fit_one_and_two_nodes_of_eight(script, spec, where):
    flow, flags = _flags(script, where)
    plan = check_run(flow, None, [], flags, check=False, cluster=Cluster.parse(spec)).plan
    gpus, hybrid = SCRIPT_PLANS[script]
    plan.check_fits()
    assert plan.gpus == gpus and plan.cluster.gpus == 8 * int(spec[0])
    assert bool(plan.engines and plan.engines.hybrid) == hybrid
    assert plan.unplaced() is None  # hybrid engines with tensor parallelism are placed too


@pytest.mark.parametrize("spec", ["1x8", "2x8"])
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_examples_fit(example, spec):
    plan = check_run(EXAMPLES[example], str(ROOT / "examples" / example), [], [], check=False,
                     cluster=Cluster.parse(spec)).plan
    plan.check_fits()
    assert plan.gpus == 0  # offline and loop hosts train on the CPU unless placement asks


def test_an_openrlhf_script_on_two_nodes_fits_two_nodes_only(where):
    flow, flags = _flags(SCRIPTS / "02_grpo_rule_reward_flat.sh", where)
    flags += ["--actor_num_nodes", "2"]  # 2 × 8 workers: 16 GPUs
    check_run(flow, None, [], flags, check=False, cluster=Cluster.parse("2x8")).plan.check_fits()
    plan = check_run(flow, None, [], flags, check=False, cluster=Cluster.parse("1x8")).plan
    with pytest.raises(ConfigError, match=r"asks for 16 GPU\(s\); this cluster has 8 \(models "
                                          r"2×8 × 1, vLLM engines 4 × 2 within host models\)"):
        plan.check_fits()


def _run(tiny_model_dir, *args: str) -> list[str]:
    sets = [f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=8",
            "rollout.batch_size=8", "train.batch_size=8", "reward.sources=rule:target:e",
            "rollout.engine=hf"]  # (vLLM serves no head size as small as the tiny model's)
    return ["run", "grpo", *[a for s in sets for a in ("--set", s)], *args]  # args win


def test_the_dry_run_prints_the_plan_for_the_cluster(capsys, tiny_model_dir, monkeypatch):
    monkeypatch.setenv(SHARED_ENV, "1")  # the store: a path every node of the cluster shares
    assert main(_run(tiny_model_dir, "--dry-run", "--cluster", "2x8", "--set",
                     "actor.num_gpus_per_node=4")) == 0
    out = capsys.readouterr().out.splitlines()
    # train.colocate_all unset on GPUs: OpenRLHF's layout, the reference on a GPU of its own
    assert "plan: 2 node(s) × 8 GPU(s), CPUs not counted; the run takes 5 GPU(s)" in out
    assert "fits: 2 node(s) × 8 GPU(s), CPUs not counted: the run takes 5 of 16 GPU(s)" in out
    assert out[-1] == "executor: ray (the cluster has GPUs (placed through Ray))"


def test_a_two_node_dry_run_refuses_a_store_the_nodes_do_not_share(capsys, tiny_model_dir,
                                                                     monkeypatch):
    monkeypatch.delenv(SHARED_ENV, raising=False)
    assert main(_run(tiny_model_dir, "--dry-run", "--cluster", "2x8", "--store",
                     "/tmp/alignflow-not-shared")) == 2
    assert "is a path on each node's own disk" in capsys.readouterr().err


def test_an_oversized_config_is_refused_in_one_line(capsys, tiny_model_dir):
    assert main(_run(tiny_model_dir, "--dry-run", "--cluster", "1x8", "--set",
                     "actor.num_nodes=2", "--set", "actor.num_gpus_per_node=8", "--set",
                     "train.batch_size=16", "--set", "rollout.batch_size=16")) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(captured.err.splitlines()) == len(errors) == 1, captured.err
    assert "asks for 17 GPU(s); this cluster has 8 (actor 2×8 × 1, ref 1×1 × 1)" in errors[0]


def test_cluster_flags_are_checked(capsys, tiny_model_dir):
    assert main(_run(tiny_model_dir, "--cluster", "1x8")) == 2
    assert "use it with --dry-run, or rehearse the run here" in capsys.readouterr().err
    assert main(_run(tiny_model_dir, "--dry-run", "--cluster", "8")) == 2
    assert "expected NODESxGPUS" in capsys.readouterr().err
    assert main(_run(tiny_model_dir, "--dry-run", "--cluster", "1x8", "--simulate-cluster",
                     "1x8")) == 2
    assert "give one" in capsys.readouterr().err
    assert main(_run(tiny_model_dir, "--simulate-cluster", "1x8", "--detach")) == 2
    assert "drop --address and --detach" in capsys.readouterr().err
