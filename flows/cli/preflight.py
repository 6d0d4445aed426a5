"""Checks of what a config names, before Ray starts or the store is touched (issue 9 §3):
model folders and names (those of the roles the run's plan uses; an `s3://` or Hub source
is reached and its config.json found, nothing more is downloaded), data files (a URL's
fetched into this node's cache) and their columns, reward sources. Each problem is one line naming the config key, the value and
what was expected; all are returned together."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from alignflow.errors import ConfigError, StoreError
from alignflow.flows.config.lookup import leaves, value_at
from alignflow.tasks.data.source import DataConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.records import RunPlan

UNUSED_WHEN_ABSENT = ("ref", "critic")  # RL roles whose models a plan may leave out


def preflight(cfg: Any, plan: RunPlan | None = None, *, machine: bool = True) -> list[str]:
    """Every problem found in `cfg` (a built-in flow's config), one line each; the models
    of RL roles its `plan` leaves out (no KL term, no critic) are not loaded, so not
    checked. With `machine`, what it asks of the plan's machine too (`machine_problems`)."""
    problems: list[str] = machine_problems(cfg, plan) if plan is not None and machine else []
    unused = {r for r in UNUSED_WHEN_ABSENT if r not in plan.roles} \
        if plan is not None and "actor" in plan.roles else set()
    for key, name in leaves(cfg, "model_name_or_path"):
        if key.split(".")[0] not in unused:
            problems += _catch(_check_model, key, name)
    for key, spec, split, columns in _datasets(cfg):
        problems += _catch(_check_data, key, spec, split, columns)
    reward = value_at(cfg, "reward")
    for spec in (reward.specs if reward is not None else ()):
        problems += _catch(_check_reward, "reward", spec)
    if plan is not None:
        from alignflow.flows.cli.preflight_plan import check_cpus, check_vllm

        problems += _catch(check_vllm, plan, value_at(cfg, "actor.model_name_or_path"))
        problems += _catch(check_cpus, plan)
    if not problems and isinstance(value_at(cfg, "data"), DataConfig) and reward is not None \
            and not value_at(cfg, "train.agent_func_path"):  # an agent's environment rewards
        problems += _catch(_check_labels, cfg.data, reward.specs)
    return problems


def _catch(check, *args) -> list[str]:
    try:
        check(*args)
    except (ConfigError, StoreError) as exc:  # a source unreachable is one line too
        return [str(exc)]
    return []


def _check_model(key: str, name: str) -> None:
    from alignflow.artifacts.sources import check_source, model_source
    from alignflow.tasks.zoo.registry import known_models, resolve_model

    if name in known_models():
        return  # prepared on first use
    if model_source(name):
        try:
            return check_source(name, "config.json")
        except (ConfigError, StoreError) as exc:
            raise ConfigError(f"config key {key!r} = {name!r}: {exc}") from None
    folder = Path(resolve_model(name, prepare=False)).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(f"config key {key!r} = {name!r}: no config.json in {folder}; expected "
                          "an HF model folder, an HF name in the local cache, or one of "
                          f"{sorted(known_models())}")


def _datasets(cfg: Any) -> Iterator[tuple[str, str, str | None, tuple[str | None, ...]]]:
    """(key, spec, split, columns it must have) of each dataset the config reads: the
    training data, the eval set (read with the training data's keys in RL: `evaluation.py`)
    and the pretraining data."""
    data = cfg.data
    if isinstance(data, DataConfig):  # RL and the loops: prompts
        yield ("data.prompt_dataset", data.prompt_dataset, data.prompt_split,
               _prompt_columns(data, data.prompt_dataset))
        ev = value_at(cfg, "eval")
        if getattr(ev, "dataset", None):
            yield "eval.dataset", ev.dataset, ev.split, _prompt_columns(data, ev.dataset)
    else:  # an offline objective's examples
        cols = _offline_columns(cfg.KIND, data)
        yield "data.dataset", data.dataset, data.dataset_split, cols
        if cfg.eval.dataset:  # the same as data.dataset: --eval_split alone (eval_source.py)
            key = "eval.split of data.dataset" if cfg.eval.dataset == data.dataset \
                else "eval.dataset"
            yield key, cfg.eval.dataset, cfg.eval.split, cols
    ptx = value_at(cfg, "algo.ptx")
    if ptx is not None and ptx.enabled:
        yield "algo.ptx.pretrain_data", ptx.pretrain_data, None, (ptx.pretrain_key,)


def _prompt_columns(data: DataConfig, spec: str) -> tuple[str | None, ...]:
    """The columns prompts are read from in `spec`, as `load_prompts` reads them (a named
    set's own columns for the keys left null)."""
    from alignflow.tasks.data.named import with_own_columns

    own = with_own_columns(data, spec)
    return own.input_key, own.label_key


def _offline_columns(kind: str, d: Any) -> tuple[str | None, ...]:
    if kind in ("sft", "distill"):
        return d.input_key, d.output_key
    if kind == "csft":
        return d.input_key, d.output_key, d.score_key
    if kind == "prm":
        return d.input_key, d.label_key
    if kind == "kto" and d.label_key is not None:
        return d.input_key, d.output_key, d.label_key
    return d.prompt_key, d.chosen_key, d.rejected_key


def _read(spec: str, split: str | None) -> Any:
    """The data set `spec` names, for a check: read as arrow (the driver imports no
    `datasets`) unless only `datasets` reads it (a hub name, a saved Dataset folder)."""
    from alignflow.tasks.data.files import read_for_check

    found = read_for_check(spec, split)
    if found is not None:
        return found
    from alignflow.tasks.data.loading import load_dataset_spec

    return load_dataset_spec(spec, split=split)


def _check_data(key: str, spec: str, split: str | None, columns: tuple[str | None, ...]) -> None:
    from alignflow.tasks.data.prompts import refuse_empty, require_keys

    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        try:
            ds = _read(item, split)
            require_keys(ds, *columns)
            if key in ("data.prompt_dataset", "eval.dataset") and columns[0] is not None:
                refuse_empty(ds, columns[0])
        except ConfigError as exc:
            raise ConfigError(f"config key {key!r} = {item!r}: {exc}") from None


def _check_reward(key: str, spec: str) -> None:
    from alignflow.tasks.rewards.registry import model_folder, split_name

    _name, source = split_name(spec)
    where = f"config key {key!r}: source {source!r}"
    if source.startswith("rule:"):
        from alignflow.tasks.rewards.answers import check_rule

        check_rule(source)
    elif source.startswith(("http://", "https://")):
        for url in source.split(","):
            if not urlparse(url).netloc:
                raise ConfigError(f"{where}: {url!r} has no host; expected http(s)://host[:port]/path")
    elif source.endswith(".py"):
        _check_reward_file(where, Path(source).expanduser())
    else:
        _check_model(key, model_folder(source))


def _check_reward_file(where: str, path: Path) -> None:
    """The file exists and defines `reward_func` (read as text: nothing is imported)."""
    if not path.is_file():
        raise ConfigError(f"{where}: file not found; expected a .py file defining reward_func")
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as exc:
        raise ConfigError(f"{where}: line {exc.lineno}: {exc.msg}") from None
    if not any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "reward_func"
               for n in tree.body):
        raise ConfigError(f"{where}: defines no reward_func(queries, prompts, labels)")


# -- what a run asks of the machine it is planned for, refused before anything starts (not at
# run time); `--ignore-hardware` leaves those flags out instead (`flows/compat/argv.py`)
HOW = "run it where there is one, or add --ignore-hardware to run on this machine"


def machine_problems(cfg: Any, plan: RunPlan) -> list[str]:
    """Every way `cfg` asks for hardware `plan`'s cluster does not have, one line each."""
    problems, gpus = [], plan.cluster.gpus
    try:  # GPU memory is refused after the dry run's report, or when hosts are declared
        dataclasses.replace(plan, memory=None).check_fits()
    except ConfigError as exc:
        problems.append(f"{exc} ({HOW})")
    engines, engine = value_at(cfg, "vllm.num_engines"), value_at(cfg, "rollout.engine")
    if (engines or engine == "vllm") and not rules.vllm_installed() \
            and not plan.cluster.vllm_assumed:  # (described or simulated: its nodes have it)
        asked = f"vllm.num_engines = {engines}" if engines else "rollout.engine = 'vllm'"
        problems.append(f"{asked}: vLLM is not installed on this machine (the HF engine would "
                        f"generate instead); expected vLLM installed, or --ignore-hardware")
    if (value_at(cfg, "vllm.tensor_parallel_size") or 1) > 1 and not gpus:
        problems.append("vllm.tensor_parallel_size > 1: tensor parallelism needs GPUs; this "
                        f"machine has none ({HOW})")
    attention = value_at(cfg, "ds.attn_implementation") or ""
    if attention.startswith("flash") and not gpus:
        problems.append(f"ds.attn_implementation = {attention!r}: flash attention needs a GPU; "
                        f"this machine has none ({HOW}; sdpa runs anywhere)")
    elif attention.startswith("flash") and importlib.util.find_spec("flash_attn") is None \
            and not plan.cluster.described:
        problems.append(f"ds.attn_implementation = {attention!r}: flash-attn is not installed "
                        "on this machine; expected `pip install flash-attn`, sdpa, or "
                        "--ignore-hardware")
    return problems


LABEL_ROWS = 256  # rows whose labels are read to find one a label rule can use


def _check_labels(data: DataConfig, specs: tuple[str, ...]) -> None:
    """A rule reward that compares answers with labels needs prompts that have them:
    without, every answer scores 0 for correctness and the run learns nothing."""
    from alignflow.tasks.data.named import with_own_columns
    from alignflow.tasks.rewards.answers import compares_label, extract_label
    from alignflow.tasks.rewards.registry import split_name

    data = with_own_columns(data, data.prompt_dataset)  # a named set's own label column
    labelled = [spec for spec in specs if compares_label(split_name(spec)[1])]
    if not labelled:
        return
    rule = f"reward source {labelled[0]!r}" + (" (the default: no reward source named)"
                                               if labelled == ["rule:gsm8k"] else "")
    fix = ("; set data.label_key (--label_key) to the column of reference answers, or name "
           "a reward source (--reward_pretrain, --remote_rm_url FILE.py|URL, "
           "--set reward.sources=[...])")
    if data.label_key is None:
        raise ConfigError(f"{rule} compares each answer with its prompt's label, but "
                          f"data.label_key is null: no answer could score as correct{fix}")
    for item in [s.strip() for s in data.prompt_dataset.split(",") if s.strip()]:
        ds = _read(item, data.prompt_split)
        labels = ds.select(range(min(LABEL_ROWS, len(ds))))[data.label_key]
        if not any(extract_label(str(v)) is not None for v in labels if v is not None):
            raise ConfigError(f"{rule} compares each answer with a number, but column "
                              f"{data.label_key!r} of {item!r} holds none in its first "
                              f"{len(labels)} rows (e.g. {labels[0]!r}): no answer could score "
                              f"as correct{fix}")
