"""What a committed manifest adds to the live logs: its `metrics` rows (under the one
namespace of `artifacts/metric_names.py`, each against its axis: the iteration or the
optimizer step), and for a scored batch (`rollout_scores`) a sample table of (prompt,
response, reward) with the SQL that returns all of the iteration's rollouts. The reward's
mean and spread are the score step's own `rollout/reward_*` rows, never a second series.

Everything is read from the committed Parquet files the manifest lists, so tasks log
nothing themselves and a replayed task (not committed again) is never logged twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.metric_names import axis, canonical
from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.store import Store


@dataclass(frozen=True)
class Scalar:
    key: str
    step: int
    value: float
    axis: str  # "step" (metrics rows) or "iteration" (rollout statistics)


@dataclass(frozen=True)
class Samples:
    key: str
    step: int
    columns: tuple[str, ...]
    rows: list[tuple]
    sql: str


@dataclass
class Points:
    scalars: list[Scalar] = field(default_factory=list)
    samples: list[Samples] = field(default_factory=list)


def _refs(manifest: dict, table: str) -> list[dict]:
    return [a for a in manifest.get("artifacts") or [] if a.get("table") == table]


def points(store: Store, manifest: dict, journal: dict[str, dict], every: int,
           sample_rows: int) -> Points:
    """The scalars and sample tables of one committed manifest (steps divisible by `every`)."""
    out = Points()
    for ref in _refs(manifest, "metrics"):
        rows = read_table(store, [ref], columns=["step", "key", "value"]).to_pylist()
        task = manifest.get("task_key", "")
        out.scalars += [Scalar(canonical(r["key"]), int(r["step"]), float(r["value"]),
                               axis(canonical(r["key"]), task))
                        for r in rows if r["value"] is not None and int(r["step"]) % every == 0]
    for ref in _refs(manifest, "rollout_scores"):
        _scored(store, manifest, journal, ref, every, sample_rows, out)
    return out


def _scored(store: Store, manifest: dict, journal: dict[str, dict], ref: dict, every: int,
            sample_rows: int, out: Points) -> None:
    scores = read_table(store, [ref], columns=["iteration", "prompt_id", "sample_idx", "reward"])
    if scores.num_rows == 0:
        return
    it = int(scores.column("iteration")[0].as_py())
    if it % every:
        return
    generated = _generated(store, journal, manifest["run_id"], it)
    if generated is None or not sample_rows:
        return
    reward = {(r["prompt_id"], r["sample_idx"]): r["reward"] for r in scores.to_pylist()}
    rows = sorted(generated, key=lambda r: (r["prompt_id"], r["sample_idx"]))[:sample_rows]
    run = manifest["run_id"].replace("'", "''")
    out.samples.append(Samples(
        "samples", it, ("prompt", "response", "reward"),
        [(r["prompt"], r["response"], reward.get((r["prompt_id"], r["sample_idx"])))
         for r in rows],
        f"SELECT * FROM rollouts WHERE run_id = '{run}' AND iteration = {it}"))


def _generated(store: Store, journal: dict[str, dict], run_id: str, it: int) -> list[dict] | None:
    """The iteration's generated rows (prompt, response), from the manifest that has them."""
    cols = ["iteration", "prompt_id", "sample_idx", "prompt", "response", "response_len"]
    for m in reversed(list(journal.values())):
        for ref in _refs(m, "rollouts"):
            if f"/iter={it}/" in ref.get("path", ""):
                return read_table(store, [ref], columns=cols).to_pylist()
    return None
