"""Steps of the durable loops (rejection sampling, iterative DPO): best-of-n and
best-vs-worst selection, and a round's selection as training examples. The loops train
through the offline flows' step (`tasks/offline/train.py`).
"""

# Importing the package registers its tables, so any process reading them knows the schemas.
from alignflow.tasks.loops import tables as _tables  # noqa: F401
from alignflow.tasks.offline import tables as _offline_tables  # noqa: F401
