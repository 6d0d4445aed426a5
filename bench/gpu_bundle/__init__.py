"""The offline GPU bundle: alignflow and what it needs beside a node's own CUDA torch.

`python -m bench.gpu_bundle build dist/gpu-bundle` (`make gpu-bundle`) fetches and slims it;
`--plan` resolves the package list and writes the manifest skeleton without downloading;
`verify-ray` starts the slimmed Ray (this machine's Python) with a task, an actor and a
placement group. `install.py` (copied into the bundle) installs it on the node.
"""
