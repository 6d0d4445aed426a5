"""Panels of RL runs (rows in `rollouts`): curves with spread, histograms, samples."""

from __future__ import annotations

from markupsafe import Markup

from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData, Series, constants, names
from alignflow.catalog.report.panel import Panel

# (title, rollouts column expression) — per-sample values, so each has a spread
_SAMPLE_SERIES = (("reward", "reward"), ("return", "returns[1]"), ("KL", "kl"),
                  ("response length (tokens)", "response_len"))
# (title, metric keys tried in order) — one value per iteration from the learn step
_METRIC_SERIES = (("entropy", ("train/entropy",)), ("policy loss", ("train/policy_loss",)),
                  ("critic loss", ("train/critic/loss", "train/critic/value_loss")))
_SAMPLES_SHOWN = (10, 20)  # first and last iterations listed when a run has many
_BEST_WORST_SQL = """
SELECT iteration, arg_max(prompt, reward) AS best_prompt, arg_max(response, reward) AS best,
       max(reward) AS best_reward, arg_min(prompt, reward) AS worst_prompt,
       arg_min(response, reward) AS worst, min(reward) AS worst_reward
FROM rollouts WHERE run_id = ? AND reward IS NOT NULL GROUP BY iteration ORDER BY iteration"""


def _return_is_advantage(run: RunData) -> bool:
    """Critic-free group estimators store the normalised advantage as the return: no
    separate quantity to plot (its mean is 0 by construction)."""
    row = run.rows("SELECT count(*) FILTER (WHERE returns[1] IS DISTINCT FROM advantages[1]) "
                   "AS differ FROM rollouts WHERE run_id = ? AND returns IS NOT NULL")[0]
    return row["differ"] == 0


# metric rows the rollout curves show already (the reward's mean and spread, the length)
_SHOWN_BY_ROLLOUTS = ("rollout/reward_mean", "rollout/reward_std", "rollout/response_len_mean",
                      "rollout/tokens")


def _series(run: RunData) -> list[Series]:
    run.shown_metrics.update(_SHOWN_BY_ROLLOUTS)
    out = []
    for title, expr in _SAMPLE_SERIES:
        if title == "return" and _return_is_advantage(run):
            continue
        s = run.spread(title, "rollouts", expr, "iteration")
        if title == "KL":
            run.shown_metrics.add("train/kl")  # the learn step's mean of the same KL
            s = s if s.informative else run.metric("train/kl", "KL")
        out.append(s)
    for title, keys in _METRIC_SERIES:
        key = next((k for k in keys if k in run.metric_keys), None)
        if key:
            run.shown_metrics.update(keys)  # the alternatives hold the same numbers
            out.append(run.metric(key, title))
    return out


def learning_curves(run: RunData) -> Panel | None:
    """Reward, return, KL, response length (spread over samples), entropy and loss."""
    if not run.counts["rollouts"]:
        return None
    every = _series(run)
    series, flat = [s for s in every if s.informative], constants(every)
    if not series and not flat:
        return None
    body = html.img(plots.curves(series, "iteration"), names(series)) if series else Markup()
    note = ("line: mean per iteration; bands: 25–75 % and 10–90 % of the samples (entropy and "
            "policy loss: one value per iteration from the learn step)")
    return Panel("Learning curves", html.join(body, html.note(flat)) if flat else body,
                 wide=True, sql=run.spread_sql("rollouts", "reward", "iteration"), note=note)


def reward_histograms(run: RunData) -> Panel | None:
    """Reward distribution of the first and the last iteration, on shared bins."""
    if not run.counts["rollouts"]:
        return None
    groups = first_and_last(run, "rollouts", "reward", "iteration")
    if groups is None:
        return None
    return Panel("Reward: first vs last iteration",
                 html.img(plots.histograms(groups, "reward"), "reward histograms"))


def first_and_last(run: RunData, table: str, column: str, x: str
                   ) -> list[tuple[str, list[float]]] | None:
    """Values of `column` at the first and the last `x` of the run; None when fewer than two
    `x` values or when every value is the same."""
    rows = run.rows(f"SELECT {x} AS x, list({column}) AS v FROM {table} WHERE run_id = $1 "
                    f"AND {column} IS NOT NULL AND isfinite({column}) AND {x} IN ("
                    f"(SELECT min({x}) FROM {table} WHERE run_id = $1), "
                    f"(SELECT max({x}) FROM {table} WHERE run_id = $1)) GROUP BY 1 ORDER BY 1")
    values = [v for r in rows for v in r["v"]]
    if len(rows) < 2 or min(values) == max(values):
        return None
    return [(f"{x} {r['x']} (mean {sum(r['v']) / len(r['v']):.3g})", r["v"]) for r in rows]


def _sample(prompt: object, response: object, reward: float) -> Markup:
    return Markup('<div class="sample"><span class="reward">{}</span>'
                  '<div class="prompt">{}</div><div class="response">{}</div></div>').format(
        f"{reward:.3g}", html.text(prompt, 160), html.text(response))


def samples(run: RunData) -> Panel | None:
    """The best and the worst scored sample of each iteration."""
    if not run.counts["rollouts"]:
        return None
    rows = run.rows(_BEST_WORST_SQL)
    if not rows:
        return None
    first, last = _SAMPLES_SHOWN
    shown = rows if len(rows) <= first + last else rows[:first] + rows[-last:]
    table = html.table(["iteration", "best", "worst"], [
        (r["iteration"], _sample(r["best_prompt"], r["best"], r["best_reward"]),
         _sample(r["worst_prompt"], r["worst"], r["worst_reward"])) for r in shown], "samples")
    parts = [table]
    if len(shown) < len(rows):
        parts.insert(0, html.note(f"{len(rows) - len(shown)} middle iterations left out; the "
                                  "query below returns all of them"))
    return Panel("Best and worst samples", html.join(*parts), wide=True,
                 sql=run.shown(_BEST_WORST_SQL),
                 note="by reward; hover a cut text for all of it")


def evaluation(run: RunData) -> Panel | None:
    """An RL run's evaluations on its eval prompts (`eval.*`): pass@1 (mean reward) and
    pass@n (best of n) per data source, one point per evaluation."""
    keys = sorted(k for k in run.metric_keys if k.startswith("eval/") and "/pass" in k)
    if not keys or not run.counts["rollouts"]:
        return None
    run.shown_metrics.update(k for k in run.metric_keys if k.startswith("eval/"))
    series = [run.metric(k) for k in keys]
    return Panel("Evaluation", html.img(plots.curves(series, "iteration"), names(series)),
                 wide=True, sql=run.shown("SELECT key, step, value FROM metrics WHERE "
                                          "run_id = ? AND key LIKE 'eval/%' ORDER BY key, step"),
                 note="eval.dataset answered every eval.steps iterations, "
                      "eval.n_samples_per_prompt samples per prompt at eval.temperature; "
                      "the `eval_samples` and `eval_scores` views hold each answer")
