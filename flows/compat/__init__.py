"""OpenRLHF compatibility, a front end only: OpenRLHF's command lines of every release as
data generated from the reference (`refgen`, `reference`), where each flag goes (`rules`:
derived from the renames), the release a command line comes from and what it meant then
(`era`), sorting a command line onto config keys (`argv`, `hardware`), what is said out loud
(`notes`), reading and translating a launch script (`script`, `translate`) and the flag
table of docs/openrlhf.md (`table`). The aliases a config class accepts are in
`flows/compat/aliases.py`; the defaults are the config classes' own (OpenRLHF 0.11's)."""
