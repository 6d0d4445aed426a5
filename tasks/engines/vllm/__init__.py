"""vLLM engines: the engine behind the generation API (`engine`), its config and placement
on GPUs, the engine actors and processes, the worker extension that receives weights, the
weight buckets and broadcast, and the vLLM API surface the code is checked against (`api`)."""
