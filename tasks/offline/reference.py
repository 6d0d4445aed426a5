"""Reference log-probs for DPO / KTO. Reads: `offline_examples`. Commits: `offline_reference`.

Computed once per prepared data set and reference model: the flow runs it as a cached
task, so later epochs, resumed runs and new runs on the same data reuse it.
"""

from __future__ import annotations

import pyarrow as pa
import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.offline.batches import kl_partner, kl_response, load_examples, response_logps
from alignflow.tasks.offline.kinds import objective
from alignflow.tasks.offline.records import OfflineData, ReferenceOutput
from alignflow.tasks.offline.tables import OFFLINE_REFERENCE
from alignflow.tasks.steps.host_api import Trained
from alignflow.tasks.zoo.registry import resolve_model


@torch.no_grad()
def _split_logps(model, ex: dict, pad_id: int, micro: int, with_kl: bool) -> dict[str, list]:
    n = len(ex["position"])
    partner = kl_partner(n)
    out: dict[str, list] = {"chosen": [], "rejected": [], "kl": []}
    for lo in range(0, n, micro):
        rows = range(lo, min(lo + micro, n))
        prompts = [ex["input_ids"][i] for i in rows]
        responses = [ex["chosen_ids"][i] for i in rows] + [ex["rejected_ids"][i] for i in rows]
        if with_kl:
            responses += [kl_response(ex, partner[i]) for i in rows]
        logps = response_logps(model, prompts * (3 if with_kl else 2), responses, pad_id)
        parts = logps.double().split(len(rows))
        out["chosen"] += parts[0].tolist()
        out["rejected"] += parts[1].tolist()
        out["kl"] += parts[2].tolist() if with_kl else [None] * len(rows)
    return out


def reference_logps(model, store, data: OfflineData, pad_id: int, micro_batch: int,
                    with_kl: bool) -> pa.Table:
    """`offline_reference` rows: summed response log-probs of every example under `model`."""
    columns: dict[str, list] = {"split": [], "position": [], "chosen": [], "rejected": [],
                                "kl": []}
    for split, ex in load_examples(store, data).items():
        logps = _split_logps(model, ex, pad_id, micro_batch, with_kl=with_kl)
        columns["split"] += [split] * len(ex["position"])
        columns["position"] += ex["position"]
        for key in ("chosen", "rejected", "kl"):
            columns[key] += logps[key]
    return pa.table(columns)


def reference(data: OfflineData, model: str, micro_batch: int = 8, dtype: str = "fp32",
              num_threads: int | None = None, fingerprint: str = "") -> ReferenceOutput:
    """Summed response log-probs of chosen, rejected (and the KTO KL sample) per example,
    under a reference model loaded for this task. `fingerprint` (of a local model folder)
    only keys the engine's cache."""
    scope = current_scope()
    if num_threads:
        torch.set_num_threads(num_threads)
    path = resolve_model(model)
    net = load_causal_lm(path, dtype=dtype)
    table = reference_logps(net, scope.store, data, load_tokenizer(path).pad_token_id,
                            micro_batch, objective(data.kind).kl_sample)
    return ReferenceOutput((scope.write(OFFLINE_REFERENCE, table),), table.num_rows)


def policy_reference(host: Trained, data: OfflineData, micro_batch: int = 8) -> ReferenceOutput:
    """The same log-probs under the host's policy as it stands now: the reference of a
    loop's round is the policy that starts it (no second model is held)."""
    scope = current_scope()
    model = host.trainer.model
    was_training = model.training
    model.eval()
    table = reference_logps(model, scope.store, data, host.tokenizer.pad_token_id,
                            micro_batch, objective(data.kind).kl_sample)
    model.train(was_training)
    partition = None if data.round is None else {"iter": data.round}
    ref = scope.write(OFFLINE_REFERENCE, table, partition=partition)
    return ReferenceOutput((ref,), table.num_rows)


def load_reference(store, out: ReferenceOutput) -> dict[str, dict[str, torch.Tensor]]:
    """split -> {"chosen", "rejected", "kl"} float64 tensors indexed by position."""
    rows = read_table(store, list(out.refs)).to_pylist()
    result: dict[str, dict[str, torch.Tensor]] = {}
    for split in {r["split"] for r in rows}:
        part = sorted((r for r in rows if r["split"] == split), key=lambda r: r["position"])
        result[split] = {k: torch.tensor([float(r[k] or 0.0) for r in part], dtype=torch.float64)
                         for k in ("chosen", "rejected", "kl")}
    return result
