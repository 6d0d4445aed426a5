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
from alignflow.artifacts.locations import Location, link_on_the_way, local_folder, real_path
from alignflow.errors import ConfigError, FlowError
from alignflow.flows import registry
from alignflow.flows.config.refs import Reference
from alignflow.flows.trust.sayso import Sayso, resolved

STORE_FLAG = "--trust-store for a store you own"


class Untrusted(FlowError):
    """A stored run names something this machine has not confirmed."""


@dataclass(frozen=True)
class Context:
    """Where the check happens: the run, the code hashes this machine recorded for it (from
    a record that verifies, `signing.py`, or a store the user owns), the local store's root,
    whether its records verify (`vouched`: they are this machine's say-so from the run's
    start), and why not (`unsigned`): then nothing it names acts on the store's word."""

    run_id: str
    recorded: dict[str, str]
    store_root: str | None = None
    vouched: bool = False
    unsigned: str | None = None


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
    code = meta.get("code")
    if not isinstance(code, dict):
        code = {}
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
    allowed, refusals = confirm(refs, sayso, ctx)
    if refusals:
        raise untrusted(ctx.run_id, refusals, ctx.unsigned)
    return allowed


def confirm(refs: Iterable[Reference], sayso: Sayso,
            ctx: Context) -> tuple[usercode.Allowances, list[str]]:
    """(the code `refs` may run under `sayso`, the refusals: one line each)."""
    files: dict[str, str] = {}
    modules: set[str] = set()
    refusals = [why for ref in refs if (why := _decide(ref, sayso, ctx, files, modules))]
    return usercode.Allowances(files, frozenset(modules)), refusals


def untrusted(run_id: str, refusals: list[str], unsigned: str | None = None) -> Untrusted:
    """One error for every refusal: one line each, after the run (and, for a run whose
    records do not verify, why they do not)."""
    run = f"run {run_id!r}" + (f" ({unsigned})" if unsigned else "")
    if len(refusals) == 1:
        return Untrusted(f"{run}: {refusals[0]}")
    lines = "\n".join(f"  {r}" for r in refusals)
    return Untrusted(f"{run}: {len(refusals)} things its store names need this "
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
        if sayso.store or ctx.vouched or sayso.url_ok(ref.value):
            return None
        return (f"its config sends the run's data to {ref.value!r} ({ref.key}); confirm it "
                f"with --trust {ref.value} (or {STORE_FLAG})")
    return _write_dir(ref, sayso, ctx)


def _code(ref: Reference, path: str, sayso: Sayso, ctx: Context,
          files: dict[str, str]) -> str | None:
    now = usercode.sha256_of(path)
    if now is None:
        return None  # nothing to run: the step that needs it says "not found"
    recorded = ctx.recorded.get(path)
    if path in sayso.named or recorded == now or (  # named now, as this machine hashed it,
            recorded is None and (sayso.store or sayso.named_here(path))):  # or in a folder
        files[path] = now  # named now (a store the user owns) with no hash of this machine
        return None
    what, name = _what(ref, path)
    if recorded is not None:
        return (f"{what}, which changed since the run recorded it; accept the change by "
                f"naming it: {name}")
    return (f"{what}, which this machine never hashed for the run; alignflow never imports "
            f"code a store names: resume with {name} (or {STORE_FLAG})")


def _what(ref: Reference, path: str) -> tuple[str, str]:
    """How a refusal names the code, and the flag that names it on the command line."""
    if ref.kind == "flow" and ref.key == "flow_ref":
        return f"it was started with flow {ref.value!r}, a file", f"--flow {ref.value}"
    return f"its config names code file {path!r} ({ref.key})", f"--trust {path}"


def _write_dir(ref: Reference, sayso: Sayso, ctx: Context) -> str | None:
    """A folder is judged where it resolves (`locations.py`), as its writer will open it."""
    try:
        place = Location("local", local_folder(ref.value, ref.key))
    except ConfigError as exc:
        return f"its config: {exc}"
    if ctx.store_root is not None and place.inside(ctx.store_root):
        link = link_on_the_way(place.text, ctx.store_root)  # made from the root through no
        return None if link is None else (  # link (`Store.local_folder`): one is refused now
            f"its config writes to {place.text!r} ({ref.key}) through {link!r}, a link or "
            "file inside the store; expected a folder of the store or one outside it")
    folder = real_path(place.text)
    if sayso.store or ctx.vouched or sayso.under_place(folder) or folder in sayso.named:
        return None
    return (f"its config writes to {folder!r} ({ref.key}), outside the store; confirm it "
            f"with --trust {folder} (or {STORE_FLAG})")


def check_address(run_id: str, stored: str | None, sayso: Sayso,
                  vouched: bool = False) -> str | None:
    """The Ray address to use: this command's, else the stored one if confirmed (by this
    machine's signed record: `vouched`, or the say-so)."""
    if sayso.address is not None or not stored:
        return sayso.address
    if vouched or sayso.store or sayso.url_ok(stored) or stored in sayso.named:
        return stored
    raise untrusted(run_id, [f"it was started on the Ray cluster {stored!r}; connect to it "
                             f"with --address {stored} (or --trust {stored}, or "
                             f"{STORE_FLAG})"])
