"""`--dry-run`'s size of the work and a rough time on this machine (issue 47, item 13): a
GPU-sized config run on a laptop should be caught before it starts, not after a day.

Work of an RL run: prompts per iteration × samples per prompt × tokens per sample (at most
prompt + response: `data.max_len`, else `data.prompt_max_len + rollout.max_new_tokens`),
times the iterations (`train.max_iterations`, else episodes over the prompt data). Compute
per token, in FLOP per parameter of the actor: generate 2, old log-probs 2, learn
6 × `train.max_epochs`, a reference pass 2 when a KL term needs one, a critic 8 (forward and
train); the time is that over this machine's measured speed (`speed.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alignflow.flows.cli.progress import format_duration
from alignflow.flows.cli.speed import Speed
from alignflow.flows.config.lookup import value_at

DAY_S = 86_400.0  # a run this long or longer here gets a `note:` line


@dataclass(frozen=True)
class Work:
    """The size of an RL run's work; `iterations` None where the prompt count is unknown."""

    prompts: int
    samples: int
    tokens_per_sample: int
    iterations: int | None
    iterations_why: str
    params: int | None  # the actor's parameters (None: its config.json unread)
    flop_per_param_token: float

    @property
    def tokens_per_iteration(self) -> int:
        return self.prompts * self.samples * self.tokens_per_sample

    def seconds(self, speed: Speed) -> float | None:
        """Compute alone at the measured rate; None when parameters or iterations are unknown."""
        if self.params is None or self.iterations is None or speed.flops <= 0:
            return None
        total = self.tokens_per_iteration * self.iterations * self.params
        return total * self.flop_per_param_token / speed.flops


def work_of(checked: Any) -> Work | None:
    """The work of a checked RL config (None for other flows)."""
    cfg = checked.config

    def get(key: str) -> Any:
        return value_at(cfg, key)

    if get("rollout.batch_size") is None or get("rollout.n_samples_per_prompt") is None:
        return None
    new = get("rollout.max_new_tokens")
    per_sample = get("data.max_len") or (get("data.prompt_max_len") or 0) + (new or 0)
    iterations, why = _iterations(cfg)
    roles = checked.plan.roles if checked.plan is not None else ()
    kl = get("algo.kl")
    flop = 2 + 2 + 6 * (get("train.max_epochs") or 1)
    flop += 2 if ("ref" in roles or bool(getattr(kl, "used", False))) else 0
    flop += 8 if "critic" in roles else 0
    return Work(prompts=int(get("rollout.batch_size")),
                samples=int(get("rollout.n_samples_per_prompt")),
                tokens_per_sample=int(per_sample), iterations=iterations,
                iterations_why=why, params=_actor_params(cfg), flop_per_param_token=flop)


def _iterations(cfg: Any) -> tuple[int | None, str]:
    """Iterations and where the number comes from."""
    cap = value_at(cfg, "train.max_iterations")
    episodes = value_at(cfg, "train.num_episodes") or 1
    prompts = _prompt_count(cfg)
    if prompts is None:
        return (cap, "train.max_iterations") if cap else (None, "prompt count unknown")
    total = cfg.iterations(prompts)
    per = f"{episodes} episode{'s' if episodes != 1 else ''} over {prompts:,} prompts"
    return total, f"train.max_iterations; {per}" if cap and total == cap else per


def _prompt_count(cfg: Any) -> int | None:
    """Rows of the prompt data (capped by data.max_samples); None when unreadable."""
    from alignflow.flows.cli.preflight import _read

    data = value_at(cfg, "data")
    spec = getattr(data, "prompt_dataset", None)
    if not spec or not hasattr(cfg, "iterations"):
        return None
    try:
        rows = sum(len(_read(s.strip(), data.prompt_split)) for s in spec.split(",")
                   if s.strip())
    except Exception:  # a count is a nicety: the checks have already passed or said why
        return None
    return min(rows, data.max_samples) if data.max_samples else rows


def _actor_params(cfg: Any) -> int | None:
    from alignflow.tasks.plan.memory.known import model_shape
    from alignflow.tasks.zoo.registry import model_config

    name = value_at(cfg, "actor.model_name_or_path")
    try:
        shape = model_shape(str(name), model_config) if name else None
    except Exception:  # an unreadable config.json: no time, the size still shown
        return None
    return shape.params if shape is not None else None


def work_lines(work: Work, speed: Speed | None) -> list[str]:
    """`work:` and `time:` lines, and a `note:` when the run would take a day or more here."""
    its = f"{work.iterations:,} iterations" if work.iterations else "iterations unknown"
    lines = [f"work: {work.prompts:,} prompts × {work.samples} samples per iteration, at most "
             f"{work.tokens_per_sample:,} tokens each (prompt + response) = "
             f"{_count(work.tokens_per_iteration)} tokens per iteration; {its} "
             f"({work.iterations_why})"]
    seconds = work.seconds(speed) if speed is not None else None
    if speed is None or seconds is None:
        why = "speed not measured" if speed is None else \
            "the actor's size or the iteration count is unknown"
        return [*lines, f"time: not estimated ({why})"]
    lines.append(f"time: roughly {_long(seconds)} on this machine (every sequence at full "
                 f"length, compute alone: "
                 f"{work.flop_per_param_token:g} FLOP per parameter per token × "
                 f"{_count(work.params or 0)} parameters; this machine's {speed.device}: "
                 f"{speed.flops / 1e9:,.0f} GFLOP/s, {speed.how})")
    if seconds >= DAY_S:
        lines.append(f"note: this run would take days here (~{_long(seconds)}): it is sized "
                     "for a GPU cluster; for this machine set smaller rollout.batch_size, "
                     "rollout.n_samples_per_prompt, data.max_len or train.max_iterations, or "
                     "plan a cluster with --dry-run --cluster NxG")
    return lines


def _count(n: float) -> str:
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def _long(seconds: float) -> str:
    if seconds >= DAY_S:
        return f"{seconds / DAY_S:,.1f} days"
    return format_duration(seconds)
