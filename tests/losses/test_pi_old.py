"""π_old as OpenRLHF takes it (issue 43): the trainer's own forward pass, not the engine's
behaviour log-probs. The stand-in engine's log-probs are rounded as bf16 would round them
(the HF engine's, through bfloat16: |Δ log p| up to ~1e-2), and the learn step runs on a
vLLM-sampled batch without IS correction: the ratio of the first minibatch must be exactly 1
(nothing is clipped before the first optimizer step), as in OpenRLHF's experience maker.
On the code before this change the ratio was exp(Δ) ≠ 1 and this test failed."""

from __future__ import annotations

import types

import pyarrow as pa
import pytest
import torch

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import TaskScope, use_scope
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.rl import learn
from alignflow.tasks.rl.learn_config import AlgoConfig, KLConfig, LearnSettings, RLRewardConfig
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import SCORES
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.optim import TrainConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

N = 4


class StandInHost(types.SimpleNamespace):
    """The parts of a model host the learn step calls; batches 'sampled by vLLM'."""

    sampled_by = "vllm"
    ema = None
    policy_version = 0

    def wake(self, role):
        pass

    def idle(self, role):
        pass

    def save(self, store, folder, role="actor", **_):
        return folder


def _batch(model_dir):
    tok = load_tokenizer(str(model_dir), padding_side="left")
    model = load_causal_lm(str(model_dir))
    engine = HFEngine(load_causal_lm(str(model_dir)), tok, micro_rollout_batch_size=N)
    prompts = [tok.encode(f"{i}+1=") for i in range(N // 2)]
    samples = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=6, temperature=1.0,
                                                      seed=3))
    bf16 = [torch.tensor(s.behaviour_logprobs).bfloat16().float().tolist() for s in samples]
    assert any(torch.tensor(b).ne(torch.tensor(s.behaviour_logprobs)).any()
               for b, s in zip(bf16, samples, strict=True))  # the rounding is there
    return tok, model, samples, bf16


def _rollouts(samples, logprobs) -> pa.Table:
    n = len(samples)
    cols = {"run_id": ["r"] * n, "iteration": [1] * n, "task_key": ["iter-0001/generate"] * n,
            "prompt_id": [f"p{i // 2}" for i in range(n)], "sample_idx": [i % 2 for i in range(n)],
            "prompt_ids": [s.prompt_ids for s in samples],
            "response_ids": [s.response_ids for s in samples],
            "behaviour_logprobs": logprobs, "policy_version": [0] * n,
            "finish_reason": [s.finish_reason for s in samples]}
    schema = ROLLOUTS.arrow_schema
    return pa.table({f.name: cols.get(f.name, pa.nulls(n, f.type)) for f in schema},
                    schema=schema)


def _scores(rewards) -> pa.Table:
    n = len(rewards)
    cols = {"run_id": ["r"] * n, "iteration": [1] * n, "task_key": ["iter-0001/score"] * n,
            "prompt_id": [f"p{i // 2}" for i in range(n)], "sample_idx": [i % 2 for i in range(n)],
            "reward": rewards, "scores": [None] * n, "filter_score": [None] * n}
    return pa.table(cols, schema=SCORES.arrow_schema)


@pytest.mark.parametrize("loss", ["ppo", "gspo"])
def test_the_ratio_is_one_before_the_first_step_whatever_the_engines_rounding(
        tiny_model_dir, local_store, loss):
    torch.manual_seed(0)
    tok, model, samples, bf16 = _batch(tiny_model_dir)
    trainer = TorchTrainer(model, TrainerConfig(lr=1e-3, lr_warmup_ratio=0.0, min_lr_ratio=1.0,
                                                total_steps=4, max_norm=1.0))
    host = StandInHost(actor=trainer, tokenizer=tok)
    settings = LearnSettings(algo=AlgoConfig(kl=KLConfig(init_coef=0.0)),
                             actor=ActorConfig(policy_loss_type=loss), critic=CriticConfig(),
                             reward=RLRewardConfig(),
                             train=TrainConfig(batch_size=N, micro_batch_size=N, max_epochs=1),
                             packing=False, n_samples=2, temperature=1.0, max_len=6)
    with use_scope(TaskScope(local_store, "r", "iter-0001/learn", seed=1)) as scope:
        rollouts = StepOutput((scope.write("rollouts", _rollouts(samples, bf16)),), N)
        scores = StepOutput((scope.write(SCORES, _scores([1.0, 0.0, 0.0, 1.0])),), N)
        out = learn.learn_actor(host, rollouts, scores, None, 1, settings, None)
    assert out.metrics["ratio_mean"] == 1.0  # exactly: π_old is the same forward pass
    assert out.metrics["clip_frac"] == 0.0 and out.metrics["approx_kl"] == 0.0
