"""A round's generations. Reads: prompts. Commits: rollouts (with `round` set).

The RL `generate` step does the sampling; this one only adds the round so that
`SELECT round, avg(reward) FROM rollouts GROUP BY round` works. Round r reads the r-th
prompt batch and stores its rows under iteration r (the key the step tables join on).
"""

from __future__ import annotations

from alignflow.tasks.rl.generate import GenerateConfig, generate
from alignflow.tasks.rl.records import StepOutput


def generate_round(host, prompts: StepOutput, round_: int, cfg: GenerateConfig) -> StepOutput:
    """`n_samples_per_prompt` responses for each prompt of round `round_`'s batch."""
    return generate(host, prompts, round_, cfg, round_=round_)
