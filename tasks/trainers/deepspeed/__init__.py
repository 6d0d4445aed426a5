"""DeepSpeed training: the `ds.*` config section (`section`), the DeepSpeed config it
becomes, the trainer (ZeRO 0-3, offload, CPU Adam) and its checkpoints."""
