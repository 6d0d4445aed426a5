"""The printed summary table of a node check run (also written beside the results)."""

from __future__ import annotations

WIDTH = 64  # of the "figures" column


def _short(record: dict) -> str:
    """The check's own one-line summary, else its first few plain figures, else the error."""
    figures = record.get("figures") or {}
    if record["status"] == "fail" and record.get("error"):
        text = record["error"][-1].rsplit("CheckFailed: ", 1)[-1]
    elif "summary" in figures:
        text = str(figures["summary"])
    else:
        plain = [f"{k}={v}" for k, v in figures.items()
                 if isinstance(v, int | float | str | bool) and k != "check_seconds"]
        text = ", ".join(plain[:3])
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"


def table(records: list[dict]) -> str:
    """One row per check: name, status, seconds, key figures (or the failure's last line);
    below it, indented and whole, the lines a check gives as its `rows` figure."""
    name_w = max([len("check"), *(len(r["name"]) for r in records)])
    rows = [f"{'check':<{name_w}}  {'status':<10}  {'seconds':>7}  figures",
            f"{'-' * name_w}  {'-' * 10}  {'-' * 7}  {'-' * WIDTH}"]
    for r in records:
        rows.append(f"{r['name']:<{name_w}}  {r['status']:<10}  {r['seconds']:>7.1f}  "
                    f"{_short(r)}")
        rows += [f"    {line}" for line in (r.get("figures") or {}).get("rows", [])]
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    rows.append("totals: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return "\n".join(rows)
