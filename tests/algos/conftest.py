"""Shared settings of the RL flow tests: the tiny model on a toy rule reward."""

from __future__ import annotations

import pytest
import torch

from tests.rl.conftest import rl_sets  # noqa: F401  (the same small run)


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
