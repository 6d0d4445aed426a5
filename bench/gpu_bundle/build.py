"""Build the GPU bundle: plan, fetch, slim, lay out, write the manifest, check the size.

Layout of the bundle folder:
  manifest.json   every file: size, sha256, distribution, version, how it installs
  install.py      the offline installer (standard library only)
  wheels/         wheels pip installs as they are (DeepSpeed and alignflow built here)
  slim/           Ray, duckdb and pandas unpacked, pruned, stripped, as tar.xz
  fallback/       datasets 4.0 and its dill/multiprocess, for nodes with older pyarrow/hub
The plan is resolved twice: offline first (fails fast on a pin that drifted), then from
the fetched wheels' own METADATA (the authority, with the node's markers).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from bench.gpu_bundle import fetch, manifest, pins, slim
from bench.gpu_bundle.plan import Entry, Plan, chain, installed_requires, resolve

Log = Callable[[str], None]


def offline_plan(repo: Path, cache: Path | None = None) -> Plan:
    """The plan from this environment's metadata (and fetched wheels, when cached)."""
    sources = [installed_requires]
    if cache is not None:
        sources.append(cached_requires(cache / "cp312"))
    return resolve(repo / "pyproject.toml", chain(*sources))


def cached_requires(folder: Path) -> Callable[[str, str], list[str] | None]:
    def requires(name: str, version: str) -> list[str] | None:
        wheel = fetch.find_wheel(folder, name, version) if folder.is_dir() else None
        return fetch.wheel_requires(wheel) if wheel else None
    return requires


def fetch_all(plan: Plan, repo: Path, cache: Path, log: Log) -> dict[tuple[str, str], Path]:
    """(name, group) -> the fetched or built wheel, for every entry of the plan."""
    found: dict[tuple[str, str], Path] = {}
    groups = {"core": [(e.name, e.version) for e in plan.entries
                       if e.group == "core" and e.kind in ("wheel", "slim")],
              "datasets-fallback": [(n, p.version) for n, p in pins.DATASETS_FALLBACK.items()]}
    for group, wanted in groups.items():
        log(f"fetching {len(wanted)} {group} wheels for Python {pins.PYTHON}")
        for name, path in fetch.download_wheels(wanted, cache / "cp312").items():
            found[(name, group)] = path
    sdist = next(e for e in plan.entries if e.kind == "sdist")
    log(f"building {sdist.name} {sdist.version} from its source release "
        f"({' '.join(f'{k}={v}' for k, v in pins.SDIST_BUILD_ENV.items())})")
    found[(sdist.name, "core")] = fetch.build_from_sdist(sdist.name, sdist.version, cache)
    log("building the alignflow wheel")
    found[("alignflow", "core")] = fetch.build_project(repo, cache / "project")
    return found


def _name_version(wheel: Path) -> tuple[str, str]:
    name, version, _, _ = fetch.parse_wheel_filename(wheel.name)
    return str(name), str(version)


def _place(entry: Entry, wheel: Path, out: Path, cache: Path, log: Log,
           stats: dict) -> str:
    """Copies or slims one entry's wheel into the bundle; returns its path there."""
    if entry.kind != "slim":
        rel = f"{'wheels' if entry.group == 'core' else 'fallback'}/{wheel.name}"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, out / rel)
        return rel
    rel = manifest.planned_path(entry)
    log(f"slimming {wheel.name} (unpack, prune, strip, xz -9e)")
    stats[entry.name] = slim.slim_wheel(wheel, pins.SLIM[entry.name],
                                        cache / "work" / entry.name, out / rel)
    return rel


def build(repo: Path, out: Path, cache: Path, log: Log = print) -> dict:
    """Builds the bundle in `out` (replaced); returns its manifest."""
    first = offline_plan(repo, cache)  # a drifted pin fails here, before any download
    wheels = fetch_all(first, repo, cache, log)
    by_version = {_name_version(path): path for path in wheels.values()}
    plan = resolve(repo / "pyproject.toml", chain(
        lambda n, v: fetch.wheel_requires(by_version[(n, v)]) if (n, v) in by_version
        else None))
    if plan.unread:
        raise RuntimeError(f"no METADATA read for {plan.unread}; expected every pin fetched")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copy2(Path(__file__).with_name("install.py"), out / "install.py")
    stats: dict = {}
    paths = {(e.name, e.group): _place(e, wheels[(e.name, e.group)], out, cache, log, stats)
             for e in plan.entries}
    doc = manifest.document(plan, paths, out, stats)
    manifest.write(doc, out)
    if doc["total_bytes"] > pins.LIMIT_BYTES:
        raise RuntimeError(f"bundle is {doc['total_bytes']:,} bytes, over the "
                           f"{pins.LIMIT_BYTES:,} limit; slim more or exclude a package")
    return doc
