"""Steps of the durable loops (rejection sampling, iterative DPO): round generation,
best-of-n and best-vs-worst selection, and the round's SFT / DPO training chunks."""

# Importing the package registers its tables, so any process reading them knows the schemas.
from alignflow.tasks.loops import tables as _tables  # noqa: F401
