"""On-policy distillation: the advantage against the formula peers use (TRL's and veRL's
per-token reverse KL on the student's samples, β·(log π_T − log π_S)), worked by hand on
fixed tensors; the teacher's log-probs committed per token and equal to a direct forward
pass; and a tiny student's KL to a sharper teacher falling within a few iterations on CPU."""

import pytest
import torch

from alignflow.catalog.catalog import Catalog
from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from alignflow.tasks.advantages.estimators import AdvantageConfig, RolloutBatch, compute_advantages
from alignflow.tasks.losses.kl import approx_kl

# two rows of three tokens (the second row padded after two)
STUDENT = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -3.0, 0.0]])
TEACHER = torch.tensor([[-0.5, -2.5, -0.5], [-1.2, -1.0, 0.0]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


def _adv(reward, n, beta):
    kl = approx_kl(STUDENT, TEACHER, "k1") * MASK  # as the learn step hands it over
    cfg = AdvantageConfig(estimator="on_policy_distill", n=n, kl_coef=beta)
    return compute_advantages(RolloutBatch(torch.tensor(reward), MASK, kl), cfg).advantages


def test_pure_distillation_is_the_per_token_reverse_kl():
    """Constant reward: A = β·(log π_T − log π_S) token by token, 0 on padding."""
    want = [[0.5 * 0.5, 0.5 * -0.5, 0.0], [0.5 * -1.0, 0.5 * 2.0, 0.0]]
    assert torch.allclose(_adv([1.0, 1.0], 1, 0.5), torch.tensor(want))
    assert torch.allclose(_adv([1.0, 1.0], 2, 0.5), torch.tensor(want))


def test_task_reward_adds_its_baselined_value_on_every_token():
    """r = (1, 0) in one group of two: mean 0.5, so +0.5 / −0.5 on each valid token."""
    base = _adv([1.0, 1.0], 2, 1.0)
    mixed = _adv([1.0, 0.0], 2, 1.0)
    assert torch.allclose(mixed - base, torch.tensor([[0.5, 0.5, 0.5], [-0.5, -0.5, 0.0]]))
    # n = 1: the batch mean is the baseline (the same here: both rows in one batch)
    assert torch.allclose(_adv([1.0, 0.0], 1, 1.0), mixed)


def test_without_teacher_logprobs_it_says_so():
    with pytest.raises(ConfigError, match="teacher"):
        compute_advantages(RolloutBatch(torch.ones(2), MASK),
                           AdvantageConfig(estimator="on_policy_distill", n=1))


def test_config_needs_a_teacher_and_k1_in_the_reward():
    cls = load_flow("on_policy_distill")[1]
    with pytest.raises(ConfigError, match="teacher.model_name_or_path"):
        load_config(cls, sets=[])
    with pytest.raises(ConfigError, match="algo.kl.estimator"):
        load_config(cls, sets=["teacher.model_name_or_path=x", "algo.kl.estimator=k3"])
    cfg = load_config(cls, sets=["teacher.model_name_or_path=x"])
    assert "ref" in cfg.run_roles and cfg.algo.kl.init_coef == 1.0


@pytest.mark.slow
def test_student_kl_to_teacher_falls(rl_sets, subset_teacher_dir, tmp_path):
    sets = [s for s in rl_sets if not s.startswith(("algo.kl.init_coef", "reward.sources"))]
    flow, cls = load_flow("on_policy_distill")
    cfg = load_config(cls, sets=[*sets, f"teacher.model_name_or_path={subset_teacher_dir}",
                                 "reward.sources=rule:format", "train.num_episodes=2",
                                 "train.max_iterations=12"])
    out = api.run(flow, cfg, store=str(tmp_path), executor="inline", seed=1, run_id="opd")
    kl = out["teacher_kl"]
    assert len(kl) == 12 and kl[0] > 0
    print("teacher KL per iteration:", [round(k, 3) for k in kl])
    assert sum(kl[-2:]) < 0.6 * sum(kl[:2]), kl  # 4.9, 5.2 → 0.6, 0.5 on this seed
    cat = Catalog(str(tmp_path))
    rows = cat.sql("SELECT t.teacher_logprobs, r.prompt_ids, r.response_ids FROM "
                   "rollout_teacher t JOIN rollouts r USING (run_id, iteration, prompt_id, "
                   "sample_idx) WHERE t.iteration = 0 ORDER BY prompt_id, sample_idx LIMIT 1"
                   ).to_pylist()[0]
    _matches_a_direct_forward(subset_teacher_dir, rows, cfg.rollout.temperature)


def _matches_a_direct_forward(teacher_dir, row, temperature):
    from alignflow.tasks.modeling.loading import load_causal_lm

    model = load_causal_lm(str(teacher_dir))
    ids = torch.tensor([row["prompt_ids"] + row["response_ids"]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float() / temperature
    start = len(row["prompt_ids"])
    logp = torch.log_softmax(logits[start - 1:-1], -1)
    want = logp.gather(1, torch.tensor(row["response_ids"])[:, None])[:, 0]
    assert torch.allclose(torch.tensor(row["teacher_logprobs"]), want, atol=1e-4)


@pytest.mark.slow
def test_on_grpo_the_reference_as_teacher(rl_sets, subset_teacher_dir, tmp_path):
    """The flag on the RL flows: estimator on_policy_distill with the teacher as reference;
    its advantages are β·(log π_ref − log π_old) per token (constant reward: no task term)."""
    sets = [s for s in rl_sets if not s.startswith(("algo.kl.init_coef", "reward.sources"))]
    flow, cls = load_flow("grpo")
    cfg = load_config(cls, sets=[*sets, f"ref.model_name_or_path={subset_teacher_dir}",
                                 "algo.kl.init_coef=0.5", "reward.sources=rule:format",
                                 "algo.advantage.estimator=on_policy_distill",
                                 "train.max_iterations=1"])
    api.run(flow, cfg, store=str(tmp_path), executor="inline", seed=1, run_id="g")
    row = Catalog(str(tmp_path)).sql(
        "SELECT advantages, ref_logprobs, behaviour_logprobs, reward FROM rollouts "
        "WHERE run_id = 'g' ORDER BY prompt_id, sample_idx LIMIT 1").to_pylist()[0]
    assert row["reward"] == 0.0
    want = [0.5 * (r - b) for r, b in zip(row["ref_logprobs"], row["behaviour_logprobs"], strict=True)]
    assert torch.allclose(torch.tensor(row["advantages"]), torch.tensor(want), atol=1e-5)
