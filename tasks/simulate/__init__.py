"""Simulated GPU clusters: a run rehearsed on this machine as it would run on N nodes × G
GPUs (`alignflow run ... --simulate-cluster 2x4`, and the tests in `tests/sim/`).

`cluster` starts one Ray node per simulated node on this machine (a head and workers, as
`infra/local_cluster.sh` does), each advertising G fake GPUs and labelled with its index,
so every placement group, bundle, per-actor `CUDA_VISIBLE_DEVICES`, engine reservation,
rank and process group is real; only the GPUs are not. `node` is a process's view of it:
which fake GPUs Ray gave it, the device it believes it has (`cuda:<i>`, for placement and
bookkeeping: GPU branches are taken) and where its tensors live (the CPU); tensors the
device helper places on a fake GPU carry that GPU, so the strict process group (the NCCL
stand-in, `tasks/distributed/strict.py`) judges them as NCCL would. `sightings` records
what each process saw, for run.json and the tests. `node_health` is how fast a head gives
up on a lost node: alignflow's Ray health-check settings, for every head it starts.
"""
