"""`alignflow run FLOW --help` / `-h` / `--help-config`: a flow's options and config keys.

`run` hands every flag it does not know to the flow's config loader (OpenRLHF's flags), so
its parser has no automatic `-h`; without this, `--help` reached the loader and was refused
as an unknown flag after "starting flow" — the first thing a newcomer types.
"""

from __future__ import annotations

import argparse


def print_run_help(ref: str, parser: argparse.ArgumentParser) -> int:
    """The command's own options, then every config key of flow `ref` (each one a flag)."""
    parser.usage = (f"alignflow run {ref} [options] [--KEY VALUE ...] "
                    "[OpenRLHF flags ...]")
    parser.description = ("Each config key below is also a flag (--KEY VALUE); OpenRLHF's "
                          "flag names work too (shown as `also --flag`).")
    print(parser.format_help().rstrip())
    print()
    return print_config_help(ref)


def print_config_help(ref: str) -> int:
    """`--help-config`: the flow's config keys with type, default and OpenRLHF flag."""
    from alignflow.flows.config import format_config_help
    from alignflow.flows.loader import canonical_ref, load_flow

    _flow, cls = load_flow(canonical_ref(ref), named=True)
    if cls is None:
        print(f"flow {ref!r} takes a plain dict config (--config FILE, --set KEY=VALUE)")
        return 0
    print(format_config_help(cls))
    return 0
