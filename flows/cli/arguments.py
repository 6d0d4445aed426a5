"""The options of the engine's commands (`run`, `resume`, `status`, `logs`, ...): argparse
definitions only, so `alignflow COMMAND --help` and the dispatcher (`commands.py`) share them.

`run` takes its own options after FLOW with a parser of its own (`run_parser`): every flag
it does not know is the flow's (an OpenRLHF flag) and goes to the config loader."""

from __future__ import annotations

import argparse

from alignflow.flows.cli import clusters, supervise
from alignflow.flows.control.planning import CHOICES


def run_options(parser: argparse.ArgumentParser) -> None:
    """`run`'s own options (also read by `run_parser` from the words after FLOW)."""
    parser.add_argument("--config", metavar="FILE", help="YAML config file")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append", default=[],
                        help="override one dotted config key (repeatable)")
    parser.add_argument("--run-id", help="run id (default <flow>-<yyyymmdd-hhmmss>-<hex>)")
    parser.add_argument("--seed", type=int, default=None,
                        help="run seed (default 42, as OpenRLHF's --seed)")
    parser.add_argument("--executor", choices=CHOICES, default="auto",
                        help="auto (default: in this process when the run fits one, else Ray), "
                             "ray, or inline (no Ray)")
    parser.add_argument("--help-config", action="store_true",
                        help="list the flow's config keys (type, default, OpenRLHF flag) and exit")
    parser.add_argument("--detach", action="store_true",
                        help="run in a background process; print the run id and return")
    parser.add_argument("--dry-run", action="store_true",
                        help="check everything (flags, values, models, data, rewards), print the "
                             "config with where each value came from, the work's size and a "
                             "rough time on this machine, and exit")
    parser.add_argument("--ignore-hardware", action="store_true",
                        help="run on this machine: GPU / vLLM / DeepSpeed flags become notes")
    clusters.add_options(parser)
    supervise.add_options(parser)


def common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="store URL (default $ALIGNFLOW_STORE or ./alignflow-store)")


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    """Add the arguments of command `name`."""
    if name == "run":
        parser.add_argument("flow", metavar="FLOW", help="built-in flow or path/to/file.py:function")
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        run_options(parser)
    elif name == "resume":
        resume_options(parser)
    elif name in ("status", "cancel", "delete"):
        parser.add_argument("run_id", nargs="?" if name == "status" else None, metavar="RUN_ID")
    elif name == "logs":
        parser.add_argument("run_id", metavar="RUN_ID")
        parser.add_argument("task_key", nargs="?", metavar="TASK_KEY")
        parser.add_argument("-f", "--follow", action="store_true",
                            help="print the driver's progress (kept in the store) and follow "
                                 "it until the run stops, from any machine that sees the store")
    common_options(parser)
    if name in ("resume", "tick"):
        _trust_options(parser)
    if name in ("run", "resume", "tick"):
        parser.add_argument("--address", help="Ray address (auto, ray://host:10001); "
                                              "default: start Ray in-process")


def _trust_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trust", metavar="ITEM", action="append", default=[],
                        help="confirm what a stored run names beyond what this machine "
                             "signed: a code file (accepted even if changed), a directory "
                             "(code in it this machine never hashed; folders to write), a "
                             "model or data source, a URL or a Ray address (repeatable; "
                             "also $ALIGNFLOW_TRUSTED_DIRS and the trust file for folders "
                             "and URLs)")
    parser.add_argument("--trust-store", action="store_true",
                        help="the store is yours: use what its runs recorded (code only "
                             "with the hash it was recorded with)")


def resume_options(parser: argparse.ArgumentParser) -> None:
    """`resume`'s options."""
    parser.add_argument("run_id", nargs="?", metavar="RUN_ID")
    parser.add_argument("--all", action="store_true", help="resume every resumable run")
    parser.add_argument("--rerun-from", metavar="TASK_KEY",
                        help="discard this task and every task committed after it first")
    parser.add_argument("--force", action="store_true",
                        help="take over a lease whose driver is gone")
    parser.add_argument("--executor", choices=["ray", "inline"], default=None,
                        help="default: the one the run was started with")
    parser.add_argument("--flow", metavar="FILE.py:FUNCTION",
                        help="the flow the run was started with (runs of user flows: "
                             "alignflow never imports a flow a store names)")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append", default=[],
                        help="change one dotted config key no committed task has fixed, e.g. "
                             "a fix after a failure (repeatable)")
    supervise.add_options(parser)


def run_parser() -> argparse.ArgumentParser:
    """`run`'s own options after FLOW; every other flag is the flow's (OpenRLHF's)."""
    # no abbreviations of alignflow's own options: a prefix is an OpenRLHF flag's (compat/era.py)
    parser = argparse.ArgumentParser(prog="alignflow run", add_help=False, allow_abbrev=False)
    run_options(parser)
    common_options(parser)
    parser.add_argument("--address", help="Ray address (auto, ray://host:10001)")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    return parser
