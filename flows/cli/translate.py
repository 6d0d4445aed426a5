"""`alignflow translate SCRIPT.sh`: print the alignflow command (and YAML config) for an
OpenRLHF launch script, with a line per flag that changes meaning or is not supported.
Shell variables come from the environment, else from the script's own assignments."""

from __future__ import annotations

import argparse
from pathlib import Path

from alignflow.errors import ConfigError


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", metavar="SCRIPT", help="an OpenRLHF launch script (.sh)")


def run(name: str, args: argparse.Namespace) -> int:
    from alignflow.flows.compat.script import read_launch
    from alignflow.flows.compat.translate import render, translate

    path = Path(args.script)
    if not path.is_file():
        raise ConfigError(f"script {str(path)!r} not found; expected an OpenRLHF launch script")
    print(render(translate(read_launch(path.read_text()))), end="")
    return 0
