"""Shared settings of the RL flow tests: the tiny model on a toy rule reward."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def rl_sets(tiny_model_dir) -> list[str]:
    """A small, fast GRPO-family run on the tiny model: 8 prompts x 4 samples, 8 tokens, in
    the chat template, without a KL term (OpenRLHF's defaults are sized for GPUs)."""
    return [f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=64",
            "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
            "rollout.max_new_tokens=8", "rollout.micro_batch_size=16",
            "data.apply_chat_template=true", "algo.kl.init_coef=0",
            "reward.sources=rule:target:e",
            "train.batch_size=16", "train.micro_batch_size=8",
            "actor.adam.lr=1e-2", "critic.adam.lr=1e-2",
            "actor.lr_warmup_ratio=0", "critic.lr_warmup_ratio=0", "num_threads=1"]


@pytest.fixture(scope="session")
def subset_teacher_dir(tiny_model_dir, tmp_path_factory):
    """A teacher unlike the student: the tiny model after a quick SFT (60 AdamW steps) to
    answer any prompt with tokens of one eighth of the vocabulary (ids 4, 12, 20, …), so a
    student sampling near-uniformly hits the teacher's support one token in eight."""
    import shutil

    from alignflow.tasks.modeling.loading import load_causal_lm

    folder = tmp_path_factory.mktemp("teacher") / "subset-tiny"
    model = load_causal_lm(str(tiny_model_dir))
    support = torch.arange(4, 512, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(60):
        ids = torch.cat([torch.randint(4, 500, (16, 12), generator=g),
                         support[torch.randint(0, len(support), (16, 8), generator=g)]], 1)
        labels = ids.clone()
        labels[:, :12] = -100
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval().save_pretrained(folder)
    for name in tiny_model_dir.iterdir():
        if not (folder / name.name).exists():
            shutil.copy(name, folder / name.name)
    return folder
