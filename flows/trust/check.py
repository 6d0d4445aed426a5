"""Checking what a stored run names against this machine's say-so (`sayso.py`).

Every reference the run's config makes (`flows/config/refs.py`: code files, flows, URLs,
write folders) and its recorded Ray address is either confirmed — and the code among them
becomes what this process may run (`artifacts/usercode.py`) — or refused, all at once, one
line each, naming the key, the value and the flag that confirms it. Nothing is decided by
how a string looks: the references come from the typed config, and code runs only through
the loader that enforces the allowances this check returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from alignflow.artifacts import usercode
from alignflow.errors import FlowError
from alignflow.flows.config.refs import Reference
from alignflow.flows.control import registry
from alignflow.flows.trust.sayso import Sayso, resolved

STORE_FLAG = "--trust-store for a store you own"


class Untrusted(FlowError):
    """A stored run names something this machine has not confirmed."""


@dataclass(frozen=True)
class Context:
    """Where the check happens: the run, the hashes it recorded, the local store's root."""

    run_id: str
    recorded: dict[str, str]
    store_root: str | None = None


def record_of(refs: Iterable[Reference]) -> list[dict]:
    """What run.json records of the code a run starts with: key, path, sha256."""
    out = []
    for ref in refs:
        path = _code_path(ref)
        if path is not None:
            out.append({"key": ref.key, "path": path, "sha256": usercode.sha256_of(path)})
    return out


def recorded_hashes(meta: dict) -> dict[str, str]:
    """Resolved path -> sha256 of the code a run recorded (its flow file and code refs)."""
    code = meta.get("code") if isinstance(meta.get("code"), dict) else {}
    found = {r["path"]: r["sha256"] for r in code.get("refs") or []
             if isinstance(r, dict) and isinstance(r.get("path"), str) and r.get("sha256")}
    if isinstance(code.get("flow_file"), str) and code.get("flow_sha256"):
        found.setdefault(resolved(code["flow_file"]), code["flow_sha256"])
    return found


def _code_path(ref: Reference) -> str | None:
    """The code file a reference makes run (None: a built-in flow, a URL, a folder...)."""
    if ref.kind == "code":
        return resolved(ref.value)
    if ref.kind == "flow" and ref.value not in registry.BUILTIN:
        file, sep, _attr = ref.value.rpartition(":")
        return resolved(file) if sep and file.endswith(".py") else None
    return None


def check(refs: Iterable[Reference], sayso: Sayso, ctx: Context) -> usercode.Allowances:
    """The code `refs` may run under `sayso`; `Untrusted` with one line per refusal."""
    files: dict[str, str] = {}
    modules: set[str] = set()
    refusals: list[str] = []
    for ref in refs:
        why = _decide(ref, sayso, ctx, files, modules)
        if why:
            refusals.append(why)
    if refusals:
        raise untrusted(ctx.run_id, refusals)
    return usercode.Allowances(files, frozenset(modules))


def untrusted(run_id: str, refusals: list[str]) -> Untrusted:
    if len(refusals) == 1:
        return Untrusted(f"run {run_id!r}: {refusals[0]}")
    lines = "\n".join(f"  {r}" for r in refusals)
    return Untrusted(f"run {run_id!r}: {len(refusals)} things its store names need this "
                     f"machine's say-so:\n{lines}")


def _decide(ref: Reference, sayso: Sayso, ctx: Context, files: dict[str, str],
            modules: set[str]) -> str | None:
    """None when `ref` is confirmed (recording what may run), else the refusal's line."""
    path = _code_path(ref)
    if path is not None:
        return _code(ref, path, sayso, ctx, files)
    if ref.kind == "flow":
        if ref.value in registry.BUILTIN:
            return None
        if ref.value in sayso.named:
            modules.add(ref.value)
            return None
        return (f"its config names flow {ref.value!r} ({ref.key}); alignflow never imports a "
                f"module a store names: name it with --flow {ref.value}")
    if ref.kind == "url":
        if sayso.store or sayso.url_ok(ref.value):
            return None
        return (f"its config sends the run's data to {ref.value!r} ({ref.key}); confirm it "
                f"with --trust {ref.value} (or {STORE_FLAG})")
    return _write_dir(ref, sayso, ctx)


def _code(ref: Reference, path: str, sayso: Sayso, ctx: Context,
          files: dict[str, str]) -> str | None:
    now = usercode.sha256_of(path)
    if now is None:
        return None  # nothing to run: the step that needs it says "not found"
    if path in sayso.named:
        files[path] = now
        return None
    recorded = ctx.recorded.get(path)
    what, name = _what(ref, path)
    if sayso.under_place(path) or sayso.store:
        if recorded in (None, now):
            files[path] = now
            return None
        return (f"{what}, which changed since the run recorded it; accept the change by "
                f"naming it: {name}")
    return (f"{what}, outside the trusted directories; alignflow never imports code a store "
            f"names: resume with {name} (or --trust DIR, $ALIGNFLOW_TRUSTED_DIRS, or "
            f"{STORE_FLAG})")


def _what(ref: Reference, path: str) -> tuple[str, str]:
    """How a refusal names the code, and the flag that names it on the command line."""
    if ref.kind == "flow" and ref.key == "flow_ref":
        return f"it was started with flow {ref.value!r}, a file", f"--flow {ref.value}"
    return f"its config names code file {path!r} ({ref.key})", f"--trust {path}"


def _write_dir(ref: Reference, sayso: Sayso, ctx: Context) -> str | None:
    folder = resolved(ref.value) if "://" not in ref.value else ref.value
    root = ctx.store_root
    inside = root is not None and (folder == root or folder.startswith(root.rstrip("/") + "/"))
    if inside or sayso.store or sayso.under_place(folder) or folder in sayso.named:
        return None
    return (f"its config writes to {folder!r} ({ref.key}), outside the store; confirm it "
            f"with --trust {folder} (or {STORE_FLAG})")


def check_address(run_id: str, stored: str | None, sayso: Sayso) -> str | None:
    """The Ray address to use: this command's, else the stored one if confirmed."""
    if sayso.address is not None or not stored:
        return sayso.address
    if sayso.store or sayso.url_ok(stored) or stored in sayso.named:
        return stored
    raise untrusted(run_id, [f"it was started on the Ray cluster {stored!r}; connect to it "
                             f"with --address {stored} (or --trust {stored}, or "
                             f"{STORE_FLAG})"])
