"""Where task attempts run: in the driver or on Ray (`executors`), Ray joined in-process or
at an address (`local`, `connect`), warm worker processes (`pool`), worker groups of N
ranks holding stateful objects such as a policy model (`groups`, `workers`, `worker_host`),
and workers a restarted driver takes over (`adopt`, under `--supervise`)."""
