"""Typed flow configs (the public face of `alignflow.flows.config`)."""

from alignflow.flows.config import (
    ConfigField,
    config_fields,
    dump_yaml,
    format_config_help,
    from_dict,
    load_config,
    to_dict,
)

__all__ = ["ConfigField", "config_fields", "dump_yaml", "format_config_help", "from_dict",
           "load_config", "to_dict"]
