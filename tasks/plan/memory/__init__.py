"""Will it fit? Every GPU's peak bytes by phase and item, from the models' config.json
alone, before a cluster is rented (`docs/DISTRIBUTED.md`, "Will it fit?").

`shape` (a config.json's numbers) and `known` (published configs, for plans made offline),
`ask` (what else the model reads of a run's config), `states` (weights, gradients and
optimizer states by backend, ZeRO stage, offload and LoRA), `activations`, `engine` (vLLM's
share and KV cache, the HF engine, a sync's staging), `layout` (which GPUs hold what),
`parts` and `peaks` (bytes by phase), `fixes` (the flags that would make a GPU fit),
`build` (the plan), `report` (the records run.json holds).
"""
