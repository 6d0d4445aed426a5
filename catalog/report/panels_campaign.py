"""Campaign lineage: on a campaign's report, its rounds (due time, round run, new files,
gate scores, promotion) and the gate metric per round; on a round run's report, the
campaign and round it belongs to and the policy it started from."""

from __future__ import annotations

from markupsafe import Markup

from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData, Series
from alignflow.catalog.report.panel import Panel

_ROUNDS_SQL = """
SELECT round, due, status, round_run, inputs, policy_in_version, candidate_score,
       incumbent_score, promoted, policy_out_version, metric
FROM rounds WHERE campaign_run = ? ORDER BY round"""
_PARENT_SQL = """
SELECT r.campaign_run, r.round, r.due, r.status, r.policy_in_version, r.policy_in,
       r.candidate_score, r.incumbent_score, r.metric,
       (SELECT count(*) FROM campaign_inputs i
        WHERE i.run_id = r.campaign_run AND i.round = r.round) AS files
FROM rounds r WHERE r.round_run = ?"""


def _points(name: str, rows: list[dict], column: str) -> Series:
    """One value per round (no spread)."""
    ys = [r[column] for r in rows]
    return Series(name, [float(r["round"]) for r in rows], ys, ys, ys, [[y] * 4 for y in ys],
                  [1] * len(rows))


def _score_series(rows: list[dict]) -> list[Series]:
    scored = [r for r in rows if r["candidate_score"] is not None]
    metric = scored[0]["metric"] if scored else "score"
    series = [_points(f"candidate {metric}", scored, "candidate_score"),
              _points(f"current policy {metric}", scored, "incumbent_score")]
    return [s for s in series if len(s.x) >= 2]


def campaign_rounds(run: RunData) -> Panel | None:
    """The campaign's rounds and, over two or more gated rounds, the gate metric."""
    rows = run.rows(_ROUNDS_SQL)
    if not rows:
        return None
    table = html.table(
        ["round", "due", "status", "round run", "new files", "from policy", "candidate",
         "current", "promoted", "policy after"],
        [[r["round"], str(r["due"]), r["status"], r["round_run"] or "—", r["inputs"],
          f"v{r['policy_in_version']}", r["candidate_score"], r["incumbent_score"],
          "yes" if r["promoted"] else "no", f"v{r['policy_out_version']}"] for r in rows])
    series = _score_series(rows)
    plot = html.img(plots.curves(series, "round", ncols=2), "gate metric per round") \
        if series else Markup("")
    return Panel("Campaign rounds", html.join(plot, table), wide=True, sql=run.shown(_ROUNDS_SQL),
                 note="each round's run trained from the current policy on the new files; "
                      "its policy was promoted only if it beat the current one at the gate")


def campaign_parent(run: RunData) -> Panel | None:
    """For a round run: the campaign, round and policy it started from."""
    rows = run.rows(_PARENT_SQL)
    if not rows:
        return None
    r = rows[0]
    gate = "—" if r["candidate_score"] is None else \
        f"{r['metric']} {r['candidate_score']:.4g} vs current {r['incumbent_score']:.4g}"
    return Panel("Campaign", html.facts([
        ("campaign", r["campaign_run"]), ("round", r["round"]), ("due", str(r["due"])),
        ("started from", f"policy v{r['policy_in_version']} ({r['policy_in']})"),
        ("new input files", r["files"]), ("gate", gate), ("outcome", r["status"])]),
        sql=run.shown(_PARENT_SQL))
