"""OpenRLHF compatibility: its command lines as data (`reference`), the flags alignflow has
no key for (`gaps`), the one rule for defaults (`profile`), what is said out loud
(`notes`), sorting a command line (`argv`) and translating a launch script (`translate`).
The flag -> key aliases themselves are in `flows/aliases.py`."""
