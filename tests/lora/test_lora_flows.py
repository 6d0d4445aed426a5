"""LoRA through the flows on the tiny model: DPO and GRPO learn with only adapters trained,
checkpoints hold the adapters, the RL reference is the base model (adapters off), and
`alignflow export RUN --merge-lora` writes a plain HF folder equal to base + adapter."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

pytest.importorskip("peft")

from peft import PeftModel
from transformers import AutoModelForCausalLM

from alignflow.artifacts.parquet_io import read_table
from alignflow.catalog.catalog import Catalog
from alignflow.cli import main
from alignflow.flows.control import api
from alignflow.tasks.modeling.forward import response_logprobs
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.modeling.logprobs import sequence_logprobs
from tests.offline.conftest import run_flow
from tests.tolerance import network_bound

pytestmark = pytest.mark.slow
LORA = ["ds.lora.rank=8", "ds.lora.alpha=32"]
ALL_LINEAR_AND_HEAD = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head"


@pytest.fixture(scope="module")
def dpo_store(base_sets, pairs_file, tmp_path_factory):
    store = tmp_path_factory.mktemp("lora-dpo")
    out = run_flow("dpo", [*base_sets, f"data.dataset={pairs_file}", "adam.lr=2e-2",
                           "train.max_steps=12", "ckpt.save_steps=4",
                           "data.apply_chat_template=false", *LORA], store, run_id="dpo")
    return store, out


def test_dpo_with_lora_learns_and_checkpoints_adapters(dpo_store, tiny_model_dir):
    store, out = dpo_store
    assert out["steps"] == 12 and out["loss"][-1] < out["loss"][0] - 0.05, out["loss"]
    with Catalog(str(store)) as cat:
        acc = cat.sql("SELECT step > 8 AS late, avg(CAST(margin > 0 AS DOUBLE)) AS acc "
                      "FROM preferences WHERE step IS NOT NULL GROUP BY 1 ORDER BY 1").to_pylist()
    assert acc[1]["acc"] > acc[0]["acc"], acc
    ckpt = load_file(store / "runs/dpo/checkpoints/train-0002/model.safetensors")
    assert ckpt and all("lora_" in k for k in ckpt)  # the adapters only, not the base
    full = sum(p.numel() for p in load_causal_lm(str(tiny_model_dir)).parameters())
    assert sum(t.numel() for t in ckpt.values()) < full / 4
    assert (store / out["model"] / "adapter_config.json").exists()


def test_merged_export_equals_base_plus_adapter(dpo_store, tiny_model_dir, tmp_path):
    store, _ = dpo_store
    args = ["export", "dpo", "--store", str(store), "--out"]
    assert main([*args, str(tmp_path / "merged"), "--merge-lora"]) == 0
    assert main([*args, str(tmp_path / "adapter")]) == 0
    assert main([*args, str(tmp_path / "merged"), "--merge-lora"]) == 2  # not empty
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", local_files_only=True)
    assert not hasattr(plain, "peft_config")
    lora = PeftModel.from_pretrained(load_causal_lm(str(tiny_model_dir)), tmp_path / "adapter")
    base = load_causal_lm(str(tiny_model_dir))
    ids = torch.randint(4, 512, (4, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        def logp(m):
            return sequence_logprobs(m, ids, torch.ones_like(ids), 12)
        expected = logp(lora)
        # merged W + BA vs W x + B(A x): rounding only, bounded from the model's widths and
        # the logits' size (tests/tolerance.py), not from one machine's thread count
        tol = network_bound(plain.config, lora(ids).logits.abs().max())
        torch.testing.assert_close(logp(plain.eval()), expected, atol=tol, rtol=0)
        assert (logp(base) - expected).abs().max() > 10 * tol  # the adapter changed the model


def test_export_without_an_adapter_refuses_merge(tmp_path, base_sets, pairs_file):
    run_flow("sft", [*base_sets, f"data.dataset={pairs_file}", "train.max_steps=1"], tmp_path,
             run_id="full")
    args = ["export", "full", "--store", str(tmp_path), "--out", str(tmp_path / "out")]
    assert main([*args, "--merge-lora"]) == 2
    assert main(args) == 0 and (tmp_path / "out" / "model.safetensors").exists()


def test_grpo_with_lora_learns_against_the_base_reference(rl_sets, tiny_model_dir, tmp_path):
    from tests.rl.test_rl_flows import _run

    # The letter reward is mostly a matter of the output layer, which peft's all-linear
    # leaves out: adapt it too (with all-linear alone the tiny model's reward stays flat).
    sets = [*rl_sets, *LORA, f"ds.lora.target_modules=[{ALL_LINEAR_AND_HEAD}]",
            "algo.kl.init_coef=0.001", "train.max_iterations=10", "train.num_episodes=2",
            "train.max_epochs=2", "actor.adam.lr=2e-2"]
    out = _run("grpo", sets, tmp_path, run_id="grpo")
    rewards = out["reward_mean"]
    assert sum(rewards[-3:]) > 1.5 * sum(rewards[:3]), rewards
    # iteration 9's reference log-probs are the base model's, although the actor moved
    store = api.open_store(str(tmp_path))
    ref = api.get_output("grpo", "iter-0009/reference", store=str(tmp_path))
    rows = read_table(store, ref.refs).to_pylist()[:8]  # in rollout order
    roll = read_table(store, api.get_output("grpo", "iter-0009/generate",
                                            store=str(tmp_path)).refs).to_pylist()[:8]
    base = load_causal_lm(str(tiny_model_dir))
    with torch.no_grad():
        lp, _ = response_logprobs(base, [r["prompt_ids"] for r in roll],
                                  [r["response_ids"] for r in roll], packed=False, pad_id=3)
    for i, row in enumerate(rows):
        n = len(row["ref_logprobs"])
        torch.testing.assert_close(torch.tensor(row["ref_logprobs"]), lp[i, :n].float(),
                                   atol=1e-5, rtol=0)
    behaviour = torch.tensor(roll[0]["behaviour_logprobs"])
    assert (behaviour - torch.tensor(rows[0]["ref_logprobs"])).abs().max() > 1e-3
