"""A round's generations. Reads: prompts. Commits: rollouts (with `round` set).

The RL `generate` step does the sampling; this one only adds the round so that
`SELECT round, avg(reward) FROM rollouts GROUP BY round` works. Round r reads the r-th
prompt batch and stores its rows under iteration r (the key the step tables join on).
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.rl.generate import GenerateConfig, _rollout_table
from alignflow.tasks.rl.prompts import prompt_batch
from alignflow.tasks.rl.records import StepOutput


def eos_ids(tok) -> tuple[int, ...]:
    """The tokenizer's EOS and `<|im_end|>`, whichever exist."""
    ids = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    return tuple(sorted(i for i in ids if isinstance(i, int) and i >= 0 and i != tok.unk_token_id))


def generate_round(host, prompts: StepOutput, round_: int, cfg: GenerateConfig) -> StepOutput:
    """`n_samples_per_prompt` responses for each prompt of round `round_`'s batch."""
    scope = current_scope()
    batch = prompt_batch(scope.store, prompts, round_, cfg.rollout_batch_size)
    tok = host.tokenizer
    samples = host.engine.generate(batch.column("prompt_ids").to_pylist(),
                                   cfg.sampling(scope.seed, eos_ids(tok)))
    table = _rollout_table(scope, round_, batch, samples, tok)
    table = table.append_column("round", pa.array([round_] * table.num_rows, pa.int32()))
    ref = scope.write(ROLLOUTS, table, partition={"iter": round_})
    lengths = table.column("response_len").to_pylist()
    return StepOutput((ref,), table.num_rows, {
        "response_len_mean": sum(lengths) / len(lengths),
        "truncated_frac": sum(s.finish_reason == "length" for s in samples) / len(samples),
    })
