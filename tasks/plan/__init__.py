"""The run plan: which processes a run needs, where they go and on what, decided once.

`cluster` (the resources: no torch import), `placement` (the config keys a plan reads),
`records` (the plan), `rules` and `build` (how a config's ask becomes a plan), `resume`
(what a resumed run may change), `table` (what `--dry-run` shows), `memory` (each GPU's
peak bytes by phase and item: will it fit?).
"""
