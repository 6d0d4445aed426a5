"""Trainers: the contract (`base`), the PyTorch trainer (`torch_trainer`), DeepSpeed
(`deepspeed/`), how one is built from the config (`build`), the optimiser keys, the
minibatch planner, master weights, CPU Adam, sleep (freeing memory between phases) and
adapter checkpoints."""
