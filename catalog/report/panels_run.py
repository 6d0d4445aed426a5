"""Panels every run has: overview, where the time went, other metrics, config."""

from __future__ import annotations

import json
import keyword
import re
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData
from alignflow.catalog.report.panel import Panel

_ITER_KEY = re.compile(r"^(?:iter|round)-(\d+)/(.+)$")
_COUNTERS = re.compile(r"(^|/)(step|steps|global_step|optimizer_steps|epoch)$")
_MAX_METRIC_PLOTS = 24


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {sec:02d}s" if m else f"{seconds:.1f}s"


def _when(value: Any) -> str:
    if value is None:
        return "—"
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(value, datetime) else str(value)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _code(run: dict[str, Any]) -> Markup:
    """The commit (short, full on hover) and the flow file with the sha256 of its text."""
    code = _json(run.get("code")) or {}
    version = run.get("code_version")
    if not version:
        return html.text("not recorded")
    short = version[:19] if version.startswith("sha256:") else version[:12]
    parts = [Markup('<span title="{}">{}</span>').format(version, short)]
    if code.get("flow_file"):
        parts.append(Markup('<br><small title="{}">{} · sha256 {}</small>').format(
            code["flow_file"], str(code["flow_file"]).rsplit("/", 1)[-1],
            (code.get("flow_sha256") or "?")[:12]))
    return html.join(*parts)


def overview(run: RunData) -> Panel:
    """Status, timing, code version, errors, and how much the run committed."""
    r = run.run
    started = r.get("started")
    statuses: dict[str, int] = {}
    for t in run.tasks:
        statuses[t["status"] or "?"] = statuses.get(t["status"] or "?", 0) + 1
    rows = sum(t["rows"] or 0 for t in run.tasks)
    facts = html.facts([
        ("status", Markup('<span class="badge {}">{}</span>').format(
            str(r.get("status") or "unknown").lower(), r.get("status") or "unknown")),
        ("flow", r.get("flow")), ("started", _when(started)), ("ended", _when(r.get("ended"))),
        ("duration", elapsed_text(run)), ("drives", drives_text(r.get("drivers"))),
        ("seed", r.get("seed")),
        ("parent run", r.get("parent_run") or "—"), ("code version", _code(r)),
        ("tasks", ", ".join(f"{n} {s.lower()}" for s, n in sorted(statuses.items())) or "none"),
        ("rows committed", f"{rows:,}"),
    ])
    alerts = [html.alert(f"error: {r['error']}") if r.get("error") else Markup(""),
              html.alert(f"files left out: {r['problem']}") if r.get("problem") else Markup("")]
    return Panel("Run", html.join(*alerts, facts), wide=True)


def elapsed_text(run: RunData) -> str:
    """The run's duration, said how it was measured: a run driven once, the time its driver
    ran; a resumed one, first start to last end (a killed drive records no time of its own,
    so the driven time alone would count only the last drive)."""
    r, started = run.run, run.run.get("started")
    now = datetime.fromtimestamp(run.generated, UTC).replace(tzinfo=None)
    if (r.get("drivers") or 1) > 1 and isinstance(started, datetime):
        ends = [t["ended"] for t in run.tasks if isinstance(t.get("ended"), datetime)]
        end = r.get("ended") or max(ends, default=None)
        end = end if isinstance(end, datetime) else now
        span = duration((end - started).total_seconds())
        so_far = "" if r.get("ended") else " so far"
        return (f"{span}{so_far}, first start to last end, the time it sat interrupted "
                f"included (driven time recorded: {duration(r.get('duration'))})")
    if r.get("duration") is None and isinstance(started, datetime):
        return f"{duration((now - started).total_seconds())} so far"
    return duration(r.get("duration"))


def drives_text(drivers: int | None) -> str:
    """`1 (never interrupted)`, `3: interrupted and resumed 2 times`."""
    if not drivers:
        return "not recorded"
    if drivers == 1:
        return "1 (never interrupted)"
    again = "once" if drivers == 2 else f"{drivers - 1} times"
    return f"{drivers}: interrupted and resumed {again}"


def _iteration_times(run: RunData) -> tuple[list[int], dict[str, list[float]]]:
    """Seconds per step name for each iteration (or round) of the run's task keys."""
    per: dict[int, dict[str, float]] = {}
    steps: list[str] = []
    for t in run.tasks:
        match = _ITER_KEY.match(t["task_key"] or "")
        if not match or t["duration"] is None:
            continue
        it, step = int(match.group(1)), match.group(2)
        if step not in steps:
            steps.append(step)
        per.setdefault(it, {})[step] = per.get(it, {}).get(step, 0.0) + t["duration"]
    xs = sorted(per)
    return xs, {s: [per[i].get(s, 0.0) for i in xs] for s in steps}


def _waits(run: RunData) -> dict[str, list[float]]:
    """The time no task body ran: from the run's start to its first task (imports, Ray,
    data and config checks), and tasks waiting for a worker (a worker's first task waits
    for its process to start and its models to load)."""
    out: dict[str, list[float]] = {}
    firsts = [t["queued"] or t["started"] for t in run.tasks if t["queued"] or t["started"]]
    start = run.run.get("started")
    if firsts and start is not None:
        out["start-up (run start → first task)"] = [max(0.0, (min(firsts) - start)
                                                        .total_seconds())]
    queued = [t["queue_time"] for t in run.tasks if t.get("queue_time")]
    if queued:
        out["waiting for a worker (its start, model load)"] = queued
    return out


def step_times(run: RunData) -> Panel | None:
    """Seconds per step of each iteration, and the totals by task, start-up and queueing."""
    totals: dict[str, list[float]] = {}
    for t in run.tasks:
        if t["duration"] is not None:
            totals.setdefault(t["task"] or "?", []).append(t["duration"])
    if not totals:
        return None
    totals |= _waits(run)
    whole = sum(sum(v) for v in totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda kv: -sum(kv[1]))
    table = html.table(["task", "runs", "seconds", "share"], [
        (name, len(v), round(sum(v), 2), f"{100 * sum(v) / whole:.0f}%") for name, v in ranked])
    xs, parts = _iteration_times(run)
    body = table
    if len(xs) >= 1 and parts:
        chart = plots.stacked_bars(xs, parts, "iteration")
        body = html.join(html.img(chart, "seconds per step of each iteration"), table)
    sql = run.shown("SELECT task, count(*) AS runs, sum(duration) AS seconds FROM tasks "
                    "WHERE run_id = ? GROUP BY task ORDER BY seconds DESC")
    return Panel("Where the time went", body, sql=sql,
                 note="committed tasks (durations, queue times from the `tasks` view) and the "
                      "start-up before the first one")


def other_metrics(run: RunData) -> Panel | None:
    """Every metric key no other panel plotted, that changes during the run; a key whose
    numbers equal a plotted one's (a lone reward source's score is the reward) is left out."""
    series, once = [], []
    seen = {_shape(run.metric(k)) for k in run.shown_metrics if k in run.metric_axes}
    for key in run.metric_keys:
        if key in run.shown_metrics or _COUNTERS.search(key):
            continue
        s = run.metric(key)
        if len(s.x) == 1 and not s.has_spread:
            once.append((key, int(s.x[0]), s.mean[0]))
        elif s.informative and _shape(s) not in seen:
            seen.add(_shape(s))  # one plot for keys with the same numbers
            series.append(s)
    if not series and not once:
        return None
    parts = []
    if series:
        shown = series[:_MAX_METRIC_PLOTS]
        labels = [run.metric_axes.get(s.name, "step") for s in shown]
        parts.append(html.img(plots.curves(shown, labels), ", ".join(s.name for s in shown)))
    if len(series) > _MAX_METRIC_PLOTS:
        parts.append(html.note(f"{len(series) - _MAX_METRIC_PLOTS} more metric keys: query "
                               "the `metrics` view"))
    if once:
        parts.append(html.table(["recorded once", "at", "value"], once, "narrow"))
    return Panel("Other metrics", html.join(*parts), wide=True,
                 note="keys that stay constant for the whole run are left out",
                 sql=run.shown("SELECT key, step, value FROM metrics WHERE run_id = ? "
                               "ORDER BY key, step"))


def _shape(s: Any) -> tuple:
    """A series' points to 5 significant digits: near-equal series compare equal."""
    return tuple(s.x), tuple(float(f"{v:.5g}") for v in s.mean)


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted keys of a journalled config (records unwrapped from their type tags)."""
    if isinstance(value, dict) and "__type__" in value and "fields" in value:
        return _flatten(value["fields"], prefix)
    if isinstance(value, dict) and "__tuple__" in value:
        value = value["__tuple__"]
    if isinstance(value, dict) and value:
        out = []
        for k in sorted(value, key=_key):
            out += _flatten(value[k], f"{prefix}.{_key(k)}" if prefix else _key(k))
        return out
    shown = "—" if value is None else json.dumps(value) if isinstance(value, list | dict) else value
    return [(prefix or "(value)", shown)]


def _key(name: str) -> str:
    """A config key as the user spells it: `async`, not the field name `async_` (a Python
    keyword's escape; `flows/config/types.key_of`, which the catalog cannot import)."""
    return name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else str(name)


def config(run: RunData) -> Panel | None:
    """The run's config, every key (as journalled when the run started)."""
    cfg = _json(run.run.get("config"))
    if cfg is None:
        return None
    given = {_spelled(k): str(v) for k, v in (_json(run.run.get("given")) or {}).items()}
    rows = [(k, v, _set_by(k, given)) for k, v in _flatten(cfg)]
    rows.sort(key=lambda row: not row[2])  # the user's own keys first, then the defaults
    mine = sum(1 for row in rows if row[2])
    body = Markup('<div class="scroll">{}</div>').format(
        html.table(["key", "value", "set by"], [(k, v, f"● {o}" if o else "") for k, v, o in rows]))
    said = f"{mine} of {len(rows)} keys set by the run's command or config file (●, first); " \
        "the rest are defaults" if given else f"{len(rows)} keys (which were set by hand is " \
        "not recorded for this run)"
    return Panel("Config", body, wide=True, note=said,
                 sql=run.shown("SELECT config, given FROM runs WHERE run_id = ?"))


def _spelled(key: str) -> str:
    """A dotted key as the user spells it (`async.max_staleness`, not `async_`)."""
    return ".".join(_key(part) for part in str(key).split("."))


def _set_by(key: str, given: dict[str, str]) -> str:
    """Where `key`'s value was set (its own entry or a section's above it), else ''."""
    head = key
    while head:
        if head in given:
            return given[head]
        head = head.rpartition(".")[0]
    return ""
