"""The promotion gate: every policy of a campaign is evaluated once on the same fixed
prompts (greedy by default), and a round's policy is promoted only if its metric beats the
current policy's by more than `min_improvement`.

Eval generations and scores are committed like any rollouts (`rollouts`,
`rollout_scores` of the campaign's run, `iteration` = the eval's number: 0 for the initial
policy, r + 1 for round r's), so the gate's evidence is one SQL query away. The evaluation
itself runs in a worker (`evaluation.py`); the driver reads only the gate's decision here.
"""

from __future__ import annotations

from alignflow.flows.campaign.config import GateConfig
from alignflow.tasks.data.source import DataConfig


def prompt_config(gate: GateConfig) -> DataConfig:
    """The fixed eval prompts, in a fixed order (never shuffled)."""
    return DataConfig(prompt_dataset=gate.prompts, input_key=gate.input_key,
                      label_key=gate.label_key, input_template=gate.input_template,
                      apply_chat_template=gate.apply_chat_template,
                      max_samples=gate.max_samples, shuffle=False)


def beats(candidate: float, incumbent: float | None, gate: GateConfig) -> bool:
    """True when the candidate is better than the incumbent by more than min_improvement."""
    if incumbent is None:
        return True
    gain = candidate - incumbent if gate.mode == "max" else incumbent - candidate
    return gain > gate.min_improvement
