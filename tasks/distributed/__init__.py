"""Data-parallel building blocks: a torch.distributed group per role, batch shards, global sums.

`group` forms the process group (gloo on CPU; NCCL + gloo on GPU) in one process, under torchrun
or among Ray actors (`ray_group`); `sharding` splits a batch over ranks; `reduce` makes
normalisers and statistics global, so N workers on B/N rows compute what 1 worker on B does.
Importable without Ray or DeepSpeed.
"""
