"""Generation engines: the contract (`base`), the HF engine (`hf`, on CPU and GPU), the HF
stand-in for vLLM on a simulated cluster (`standin`), sampling, and vLLM (`vllm/`)."""
