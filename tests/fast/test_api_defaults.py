"""`alignflow.run` / `resume` default to what `alignflow run` / `resume` do (issue 45): a
script and a command line with nothing set start the same run (same executor choice, same
seed). Read from the signatures and the parsers themselves, so a default changed on one
side only fails here."""

from __future__ import annotations

import argparse
import inspect

import alignflow
from alignflow.flows.cli.arguments import configure, run_parser
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.control import api


def _defaults(fn) -> dict:
    return {name: p.default for name, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _cli_run(argv: list[str]) -> argparse.Namespace:
    parsed, _flags = run_parser().parse_known_args(argv)
    return parsed


def test_run_defaults_are_the_commands():
    given = _defaults(api.run)
    cli = _cli_run(["my_flow.py:flow"])
    assert given["executor"] == cli.executor == "auto"
    assert (given["run_id"], given["address"], given["store"]) == (
        cli.run_id, cli.address, None)
    assert tuple(given["trust"]) == tuple(getattr(cli, "trust", ()))


def test_run_seed_is_the_commands(tmp_path):
    """The command without --seed settles its seed in `check_run`; the API's default is it."""
    flow_file = tmp_path / "plain_flow.py"
    flow_file.write_text("import alignflow\n\n@alignflow.flow\ndef plain(config=None):\n"
                         "    return config\n")
    checked = check_run(f"{flow_file}:plain", None, [], [], seed=_cli_run(["x"]).seed)
    assert _defaults(api.run)["seed"] == checked.seed


def test_resume_defaults_are_the_commands():
    parser = argparse.ArgumentParser()
    configure("resume", parser)
    cli = parser.parse_args(["some-run"])
    given = _defaults(api.resume)
    assert given["executor"] == cli.executor
    assert given["rerun_from"] == cli.rerun_from
    assert given["force"] == cli.force
    assert given["trust_store"] == cli.trust_store
    assert tuple(given["trust"]) == tuple(cli.trust)
    assert tuple(given["sets"]) == tuple(cli.sets)


def test_the_package_exposes_the_same_functions():
    assert alignflow.run is api.run
    assert alignflow.resume is api.resume
