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
- `--pretrain_data` without `--ptx_coef`: that release's ptx_coef;
- IS correction until v0.9.0 (`--vllm_is_truncated_threshold T`, one value, default 2) is
  the one-sided clamp min(ratio, T): `algo.advantage.is_correction_threshold` = (0, T);
- losses until v0.10.2 are each micro-batch's own mean (`train.loss_normalizer=micro_batch`),
  from v0.10.3 one mean over the optimizer step: a command line of flat flags gets the former;
- v0.11.2's IS correction as three knobs (`is_correction_level/_mode/_gating`, #1339) is
  alignflow's `is_correction_enable` + `is_correction_type` (token clip = tis, token mask =
  icepop, seq mask = seq-mask-tis) + `is_correction_gating` (ratio, binary_kl, tv; a
  divergence gate masks only, as OpenRLHF's `PolicyLoss` refuses clip with it).
Every key set here is one its flag does not name: each is said in a `note:` line (`_put`).
"""

from __future__ import annotations

from typing import Any

from alignflow.flows.compat import reference
from alignflow.flows.compat.rules import CONVERTED
from alignflow.flows.compat.rules import SEED as SEEDS

OWN = CONVERTED  # the flags whose keys `apply` sets
LENGTHS = ("prompt_max_len", "generate_max_len")
IS_THRESHOLD, IS_KEY = "vllm_is_truncated_threshold", "algo.advantage.is_correction_threshold"
IS_KNOBS = {"algo.advantage.is_correction_level": "off", "algo.advantage.is_correction_mode":
            "mask", "algo.advantage.is_correction_gating": "ratio"}  # v0.11.2, its defaults
IS_TYPES = {("token", "clip"): "tis", ("token", "mask"): "icepop", ("seq", "mask"): "seq-mask-tis"}
LAST_RIGHT_TRUNCATION = reference.release("v0.9.0")
LAST_ONE_SIDED_IS = reference.release("v0.9.0")
LAST_MICRO_BATCH_MEAN = reference.release("v0.10.2")
MEANING = {
    "prompt_max_len": "prompt tokens P: `data.max_len` = P + G (unless --max_len), over-long "
                      "prompts cut to P keeping their start until v0.9.0 (`data.truncation_side"
                      "=right`), their end from v0.9.1",
    "generate_max_len": "response tokens G: `rollout.max_new_tokens` = G, `data.max_len` = P + G",
    IS_THRESHOLD: "until v0.9.0 one value T (default 2): the IS weight is min(ratio, T), "
                  f"`{IS_KEY}` = (0, T); from v0.9.1 two values, the band (low, high)",
    **dict.fromkeys(IS_KNOBS, "v0.11.2's IS correction: with the other two knobs, "
                    "`algo.advantage.is_correction_enable` + `is_correction_type` (token clip = "
                    "tis, token mask = icepop, seq mask = seq-mask-tis) + `is_correction_gating` "
                    "(ratio, binary_kl, tv: a divergence gate masks only)"),
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
    _is_threshold(found, given, at, out)
    _is_knobs(given, out)
    _loss_normalizer(found, keys, at, out)


def _is_knobs(given: dict[str, list[str]], out: Any) -> None:
    """v0.11.2's level × mode × gating onto alignflow's enable + type (#1339)."""
    named = [k for k in IS_KNOBS if k in given]
    if not named:
        return
    level, mode, gating = ((given.get(k) or [d])[0] for k, d in IS_KNOBS.items())
    shown = " ".join(f"--{k} {' '.join(given[k])}".rstrip() for k in named)
    kind = IS_TYPES.get((level, mode))
    if level == "off":
        _put(out, "algo.advantage.is_correction_enable", "false", shown)
    elif kind is None or (gating != "ratio" and mode == "clip"):
        out.problems.append(f"{shown}: expected level token with mode clip or mask, or level "
                            f"seq with mode mask, and mode mask with gating {gating} (OpenRLHF "
                            "refuses seq with clip, and clip with a divergence gate)")
    else:
        _put(out, "algo.advantage.is_correction_enable", "true", shown)
        _put(out, "algo.advantage.is_correction_type", kind, shown)
        _put(out, "algo.advantage.is_correction_gating", gating, shown)


def _is_threshold(found: list, given: dict[str, list[str]], at: reference.Release,
                  out: Any) -> None:
    """Two values: the band; one (the flag until v0.9.0), or IS correction switched on by
    a command line of that era: OpenRLHF's clamp(max=T), which is the band (0, T)."""
    values = given.get(IS_THRESHOLD)
    if not values and not ("enable_vllm_is_correction" in given and at <= LAST_ONE_SIDED_IS):
        return
    if values and len(values) > 1:
        _put(out, IS_KEY, ",".join(values), f"--{IS_THRESHOLD}")
        return
    flag = _flag(found, IS_THRESHOLD)
    high = values[0] if values else str(reference.value_of(flag.default_at(at)) if flag else 2)
    why = f"--{IS_THRESHOLD} {high}" if values else "--enable_vllm_is_correction"
    _put(out, IS_KEY, f"0,{high}", f"{why} (OpenRLHF <= v0.9.0: the IS weight is "
         f"min(ratio, {high}))")


def _loss_normalizer(found: list, keys: Any, at: reference.Release, out: Any) -> None:
    """A command line of OpenRLHF flags up to v0.10.2 (the flat ones): each micro-batch's
    own mean, unless it names `train.loss_normalizer` itself."""
    key = "train.loss_normalizer"
    if key not in keys.paths or at > LAST_MICRO_BATCH_MEAN:
        return
    named = [g[0].replace("-", "_") for g, flag in found]
    if key in named or not any(flag is not None and flag.name not in SEEDS
                               for _g, flag in found):
        return
    _put(out, key, "micro_batch", f"OpenRLHF v{_text(at)}'s flags (each micro-batch's own "
         "mean until v0.10.2)")


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
    value = reference.value_of(flag.default_at(at)) if flag else 0
    return int(value) if isinstance(value, int | float | str) else 0


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
    """Set `key`, which no flag of the command line names: said in a `note:` line."""
    out.flags.append(f"--{key}={value}")
    out.spelled[f"--{key}"] = why
    out.notes.append(f"{key} = {value}, set by {why} (a key the command line does not name)")


def _text(at: reference.Release) -> str:
    *head, post = at
    return ".".join(map(str, head)) + (f".post{post}" if post else "")
