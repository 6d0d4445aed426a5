"""The one-GPU node check: install a bundle offline, run the checks, write results + summary.

`bash bench/gpu_check.sh BUNDLE [--out DIR]` runs this file with the node's python3. The
bundle is installed into OUT/site (`install.py`: no index, no network) and the checks run
with PYTHONPATH=OUT/site:REPO, so `alignflow` comes from the installed wheel (its
package-dir mapping exists only there) and `tests`, `bench` from the checkout. A bundle
made for another Python (a CPU machine rehearsing) is install-rehearsed, and the checks then
run against this interpreter's own packages; so does `--current-env` without a bundle.
Results: OUT/results.jsonl (one JSON line per check) and OUT/summary.txt; exit 0 once they
are written, whatever the checks found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO))  # last: bench.* importable, alignflow never from the checkout root

from bench.gpu_bundle import install as installer  # noqa: E402
from bench.gpu_check import runner, summary  # noqa: E402
from bench.gpu_check.checks import CHECKS, Check, by_name  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, nargs="?", help="folder made by make gpu-bundle")
    parser.add_argument("--current-env", action="store_true",
                        help="no bundle: check this interpreter's own packages")
    parser.add_argument("--out", type=Path, default=REPO / "dist" / "gpu-check")
    parser.add_argument("--started", type=float, default=None,
                        help="epoch seconds the command started (the budget counts from it)")
    parser.add_argument("--start-before", type=float, default=420.0,
                        help="no check starts after this many seconds")
    parser.add_argument("--end-by", type=float, default=480.0,
                        help="every check is killed by this many seconds")
    parser.add_argument("--only", default="", help="comma-separated check names")
    parser.add_argument("--spawn-all", action="store_true",
                        help="start GPU checks even where the versions check saw no CUDA")
    return parser


def _install_line(status: str, seconds: float, figures: dict, error: list[str] | None = None
                  ) -> dict:
    return {"name": "install", "status": status, "seconds": round(seconds, 2),
            "figures": figures, "error": error, "exercises": "bench/gpu_bundle/install.py: "
            "manifest hashes, datasets set, pip --no-index --target or unzip, untar",
            "expected": "pass"}


def prepare(args: argparse.Namespace) -> tuple[list[str], str, dict]:
    """(PYTHONPATH entries, manifest path or '', the install result line)."""
    if args.current_env or args.bundle is None:
        return [str(REPO)], "", _install_line("skip", 0.0, {
            "summary": "no bundle: the checks use this interpreter's packages"})
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    manifest = installer.load_manifest(args.bundle)
    rehearse = manifest["python"] != here
    if rehearse:
        print(f"bundle is for Python {manifest['python']}, this is {here}: rehearsing its "
              f"install (pip told Python {manifest['python']}), then running the checks "
              "against this environment (CPU mode here)", flush=True)
    site = args.out / ("site-rehearsal" if rehearse else "site")
    start = time.perf_counter()
    try:
        record = installer.install(args.bundle, site, rehearse=rehearse)
    except (installer.InstallError, OSError) as exc:
        line = _install_line("fail", time.perf_counter() - start, {"target": str(site)},
                             [str(exc)])
        return [str(REPO)], "", line
    figures = {**record, "summary": f"{len(record['installed'])} distributions by "
               f"{record['wheels_by']}; datasets {record['datasets_group']}"
               + (f"; rehearsal for Python {manifest['python']} on {here}" if rehearse else "")}
    line = _install_line("pass", time.perf_counter() - start, figures)
    if rehearse:  # the checks see this interpreter's packages: judge them by the pins
        return [str(REPO)], "", line
    return [str(site.resolve()), str(REPO)], str((args.bundle / "manifest.json").resolve()), line


def check_env(paths: list[str], manifest: str, out: Path) -> dict[str, str]:
    """The environment every check process gets."""
    extra = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    out = out.resolve()
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *extra]),
            "GPU_CHECK_OUT": str(out), "GPU_CHECK_MANIFEST": manifest,
            "ALIGNFLOW_MODELS_DIR": str(out / "models"),
            "TORCH_EXTENSIONS_DIR": str(out / "torch-extensions"),
            "ALIGNFLOW_GPU_TEST_MODEL": "tiny-llama", "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "TRANSFORMERS_VERBOSITY": "error", "RAY_USAGE_STATS_ENABLED": "0"}


def _selected(only: str) -> list[Check]:
    if not only:
        return list(CHECKS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name()]
    if unknown:
        raise SystemExit(f"gpu_check: unknown check(s) {unknown}; expected some of "
                         f"{list(by_name())}")
    return [c for c in CHECKS if c.name in names]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    checks = _selected(args.only)
    budget = runner.Budget(args.started or time.time(), args.start_before, args.end_by)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    paths, manifest, install_line = prepare(args)
    results.write_text(json.dumps(install_line, default=str) + "\n")
    ctx = runner.Context(sys.executable, check_env(paths, manifest, args.out), REPO,
                         args.out / "logs")
    records = runner.run_all(checks, ctx, budget, results, spawn_all=args.spawn_all)
    text = summary.table([install_line, *records])
    (args.out / "summary.txt").write_text(text + "\n")
    print(text)
    print(f"results: {results} ({budget.elapsed():.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
