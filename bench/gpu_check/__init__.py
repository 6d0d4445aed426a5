"""The one-GPU node check (`bash bench/gpu_check.sh BUNDLE`): install, run, report.

`main.py` installs the bundle and drives `runner.py` over `checks/` (priority order, each in
its own process, inside 8 minutes); `summary.py` prints the table.
"""
