"""A round's kept samples as training examples. Reads: rollouts, rollout_selection.
Commits: `offline_examples` (the train split, with the round), so a loop trains through the
same step as the offline flows.

Best-of-n samples become SFT examples (prompt + response ids, loss on the response);
best-vs-worst pairs become preference examples (prompt ids, chosen and rejected ids).
Token ids are the generated ones: nothing is re-tokenised.
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.loops.records import Selection
from alignflow.tasks.offline.prepare import examples_table
from alignflow.tasks.offline.records import OfflineData
from alignflow.tasks.offline.tables import OFFLINE_EXAMPLES
from alignflow.tasks.steps.records import StepOutput


def selected_rows(store, rollouts: StepOutput, selection: Selection, role: str) -> pa.Table:
    """The rollout rows (ids and text) of the selection rows with `role`, in selection order."""
    sel = read_table(store, selection.refs, columns=["prompt_id", "sample_idx", "role", "pair_id"])
    roll = read_table(store, rollouts.refs, columns=["prompt_id", "sample_idx", "prompt",
                                                     "response", "prompt_ids", "response_ids"])
    where = {k: i for i, k in enumerate(zip(roll.column("prompt_id").to_pylist(),
                                            roll.column("sample_idx").to_pylist(), strict=True))}
    keep = [(p, s, pair) for p, s, r, pair in zip(
        *(sel.column(c).to_pylist() for c in ("prompt_id", "sample_idx", "role", "pair_id")),
        strict=True) if r == role]
    rows = roll.take(pa.array([where[(p, s)] for p, s, _ in keep], pa.int64()))
    return rows.append_column("pair_id", pa.array([pair for *_, pair in keep], pa.string()))


def _sft_rows(store, rollouts: StepOutput, selection: Selection, round_: int) -> list[dict]:
    rows = selected_rows(store, rollouts, selection, "best").to_pylist()
    return [{"example_id": f"round-{round_:04d}/{r['prompt_id']}/{r['sample_idx']}",
             "prompt": r["prompt"], "response": r["response"],
             "input_ids": r["prompt_ids"] + r["response_ids"],
             "loss_mask": [0] * len(r["prompt_ids"]) + [1] * len(r["response_ids"]),
             "truncated": False} for r in rows]


def _pair_rows(store, rollouts: StepOutput, selection: Selection, round_: int) -> list[dict]:
    chosen = selected_rows(store, rollouts, selection, "chosen").to_pylist()
    rejected = selected_rows(store, rollouts, selection, "rejected").to_pylist()
    assert [c["pair_id"] for c in chosen] == [r["pair_id"] for r in rejected]
    return [{"example_id": c["pair_id"], "prompt": c["prompt"], "response": c["response"],
             "rejected": r["response"], "input_ids": c["prompt_ids"],
             "chosen_ids": c["response_ids"], "rejected_ids": r["response_ids"],
             "truncated": False} for c, r in zip(chosen, rejected, strict=True)]


_BUILDERS = {"sft": _sft_rows, "dpo": _pair_rows}  # kind -> examples from a selection


def round_examples(rollouts: StepOutput, selection: Selection, round_: int,
                   kind: str) -> OfflineData:
    """The round's selection as `kind` examples ("sft": best samples, "dpo": pairs)."""
    scope = current_scope()
    rows = _BUILDERS[kind](scope.store, rollouts, selection, round_)
    rows = [{**r, "split": "train", "position": i} for i, r in enumerate(rows)]
    ref = scope.write(OFFLINE_EXAMPLES, examples_table(rows), partition={"iter": round_})
    return OfflineData((ref,), kind, len(rows), 0, round=round_)
