"""Typed, frozen flow configs built from defaults, a YAML file, `--set` overrides and flags.

A flow config is a tree of `@dataclass(frozen=True, kw_only=True)` classes, validated once
in `__post_init__` and never mutated (derived values are properties). Sources apply in
order, each overriding the ones before: class defaults < YAML file < `--set a.b=v` <
flags (`--init_kl_coef 0.01`); a class maps other names onto its dotted keys with
`ALIASES: ClassVar[dict[str, str]]`. Values are parsed by the field's annotation, so a
typo or a bad value fails before any work starts, in one line.

    types.py    the shape of a config class (fields, sections, dotted paths)
    values.py   one value parsed by its annotation
    sources.py  YAML, --set and flags -> overrides (aliases, unknown-key suggestions)
    build.py    overrides -> the frozen tree; to_dict / from_dict / dump_yaml
    help.py     --help-config
"""

from alignflow.errors import invalid
from alignflow.flows.config.build import (
    dump_yaml,
    from_dict,
    known_part,
    load_config,
    resolve_config,
    to_dict,
)
from alignflow.flows.config.help import ConfigField, config_fields, format_config_help
from alignflow.flows.config.sources import load_plain

__all__ = ["ConfigField", "config_fields", "dump_yaml", "format_config_help", "from_dict",
           "invalid", "known_part", "load_config", "load_plain", "resolve_config",
           "to_dict"]
