"""The command line's flags, tokenized once: `--name value...` groups that both the OpenRLHF
translation (`flows/compat/argv.py`) and the config loader (`sources.apply_flags`) read, so
the two never disagree on where a flag's values end."""

from __future__ import annotations

Group = tuple[str, list[str], bool]  # (name, value tokens, given with '=')


def groups(tokens: list[str]) -> list[Group]:
    """(name, value tokens, had '=') per `--flag`. A token before any flag, after a
    `--flag=value` or a bare `--` starts a group named "" (the loader refuses it)."""
    out: list[Group] = []
    for token in tokens:
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token[2:].partition("=")
            out.append((name, [value] if eq else [], bool(eq)))
        elif out and not out[-1][2] and token != "--":
            out[-1][1].append(token)
        else:
            out.append(("", [token], False))
    return out


def joined(group: Group) -> list[str]:
    """A group as tokens again (`--name=value` kept in one token)."""
    name, values, eq = group
    if not name:
        return list(values)
    return [f"--{name}={values[0]}"] if eq else [f"--{name}", *values]
