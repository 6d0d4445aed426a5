"""The release a command line's OpenRLHF flags come from, and what that release meant.

A command line belongs to the newest release whose parser has every OpenRLHF flag it uses
(flags spelled whole or as an unambiguous prefix, as argparse accepts them). Keys no flag
names keep alignflow's defaults, which are OpenRLHF 0.11's; a release's own meaning applies
only to what its flags name:
- `--prompt_max_len P` / `--generate_max_len G` / (until v0.9.7) `--max_len`: prompt +
  response = `data.max_len` (P + G unless --max_len overrides), `rollout.max_new_tokens` G,
  the missing one at that release's default; over-long prompts keep their start until v0.9.0
  (`data.truncation_side=right`), their end from v0.9.1;
- the `--bf16` era (until v0.9.1): without `--bf16` the model trains in its own dtype;
- `--pretrain_data` without `--ptx_coef`: that release's ptx_coef.
"""

from __future__ import annotations

from typing import Any

from alignflow.flows.compat import reference
from alignflow.flows.compat.rules import CONVERTED as LENGTHS

LAST_RIGHT_TRUNCATION = reference.release("v0.9.0")
MEANING = {
    "prompt_max_len": "prompt tokens P: `data.max_len` = P + G (unless --max_len), over-long "
                      "prompts cut to P keeping their start until v0.9.0 (`data.truncation_side"
                      "=right`), their end from v0.9.1",
    "generate_max_len": "response tokens G: `rollout.max_new_tokens` = G, `data.max_len` = P + G",
}


def lookup(clis: tuple[str, ...], name: str, *, prefix: bool = True) -> reference.Flag | None:
    """The OpenRLHF flag `--name` stands for: exact in one of `clis`, else (with `prefix`)
    the one flag it is an unambiguous prefix of, in the newest release where it is one."""
    norm = name.replace("-", "_")
    for cli in clis:
        if norm in reference.of_cli(cli):
            return reference.of_cli(cli)[norm]
    if not prefix or not norm:
        return None
    found = [f for cli in clis for n, f in reference.of_cli(cli).items() if n.startswith(norm)]
    for at in _releases(clis):
        here = {f.name: f for f in found if f.present(at)}
        if len(here) == 1:
            return next(iter(here.values()))
    return None


def _releases(clis: tuple[str, ...]) -> list[reference.Release]:
    return sorted({r for cli in clis for r in reference.generations(cli)}, reverse=True)


def generation(clis: tuple[str, ...], used: list[reference.Flag]) -> reference.Release:
    """The newest release whose parser has every flag in `used` (else the most of them)."""
    if not clis:
        return reference.release(reference.NEWEST)
    scored = [(sum(f.present(at) for f in used), at) for at in _releases(clis)]
    return max(scored)[1]


def apply(found: list[tuple[Any, reference.Flag | None]], keys: Any, at: reference.Release,
          out: Any) -> None:
    """Add the keys the command line's release gives to what its flags name."""
    given = {flag.name: values for (_n, values, _e), flag in found if flag is not None}
    if any(n in given for n in LENGTHS) or ("max_len" in given and _has(found, "generate_max_len",
                                                                           at)):
        _lengths(found, given, at, out)
    if _has(found, "bf16", at) and not any(n in given for n in ("bf16", "param_dtype",
                                                                 "ds.param_dtype")):
        _own_dtype(given, keys, out)
    if "pretrain_data" in given and "ptx_coef" not in given:
        flag = _flag(found, "ptx_coef")
        if flag is not None:
            _put(out, "algo.ptx.ptx_coef", flag.default_at(at), "--pretrain_data")


def _has(found: list, name: str, at: reference.Release) -> bool:
    flag = _flag(found, name)
    return flag is not None and flag.present(at)


def _flag(found: list, name: str) -> reference.Flag | None:
    """Flag `name` of the CLI the command line's flags come from."""
    clis = {flag.cli for _g, flag in found if flag is not None}
    for cli in sorted(clis):
        if name in reference.of_cli(cli):
            return reference.of_cli(cli)[name]
    return None


def _number(given: dict[str, list[str]], found: list, name: str, at: reference.Release) -> int:
    values = given.get(name)
    if values:
        return int(values[0])
    flag = _flag(found, name)
    return int(reference.value_of(flag.default_at(at))) if flag else 0


def _lengths(found: list, given: dict[str, list[str]], at: reference.Release, out: Any) -> None:
    try:
        prompt = _number(given, found, "prompt_max_len", at)
        response = _number(given, found, "generate_max_len", at)
        total = int(given["max_len"][0]) if given.get("max_len") else prompt + response
    except ValueError as exc:
        out.problems.append(f"--prompt_max_len / --generate_max_len / --max_len: expected "
                            f"integers ({exc})")
        return
    why = "--prompt_max_len + --generate_max_len"
    _put(out, "data.max_len", str(total), why)
    _put(out, "rollout.max_new_tokens", str(response), "--generate_max_len")
    side = "right" if at <= LAST_RIGHT_TRUNCATION else "left"
    _put(out, "data.truncation_side", side, f"--prompt_max_len (OpenRLHF v{_text(at)})")


def _own_dtype(given: dict[str, list[str]], keys: Any, out: Any) -> None:
    """`ds.param_dtype`: the model's own dtype (bf16 weights train in bf16, else fp32)."""
    model = next((v[0] for n, v in given.items() if n in ("pretrain",) and v), None)
    dtype = _model_dtype(model) if model else None
    value = "bf16" if dtype == "bfloat16" else "fp32"
    if "ds.param_dtype" in keys.paths:
        _put(out, "ds.param_dtype", value, f"no --bf16 (the model's own dtype: {dtype or '?'})")


def _model_dtype(model: str) -> str | None:
    """`torch_dtype` of a model's config.json (a folder, offline name or source), if readable."""
    from alignflow.tasks.zoo.registry import model_config

    config = model_config(model) or {}
    return config.get("torch_dtype") or config.get("dtype")


def _put(out: Any, key: str, value: str, why: str) -> None:
    out.flags.append(f"--{key}={value}")
    out.spelled[f"--{key}"] = why


def _text(at: reference.Release) -> str:
    *head, post = at
    return ".".join(map(str, head)) + (f".post{post}" if post else "")
