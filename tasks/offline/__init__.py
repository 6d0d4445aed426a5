"""Offline training steps: SFT, reward model, DPO/IPO/cDPO, KTO, distillation, PRM, CSFT.

Importable without Ray or the flow engine; `alignflow.flows.offline.steps` wraps the step
functions as tasks. Data is prepared once (`prepare`), reference log-probs are computed
once (`reference`), and `train` runs one `save_steps` chunk of optimizer steps on a host.
"""

# Importing the package registers its tables, so any process reading them knows the schemas.
from alignflow.tasks.offline import tables as _tables  # noqa: F401
