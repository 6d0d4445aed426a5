"""Steps of the durable loops (rejection sampling, iterative DPO): round generation,
best-of-n and best-vs-worst selection, and the round's SFT / DPO training chunks."""
