"""Generation engines: the contract (`base`) and the default HF engine (`hf`)."""
