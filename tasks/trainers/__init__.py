"""Trainers: the contract (`base`) and the plain PyTorch trainer (`torch_trainer`)."""
