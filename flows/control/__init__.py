"""Run control: a run's life from the command to its recorded outcome — the Python API
(`api`), finding the flow (`loader`, `registry`), the run plan as the engine sees it
(`planning`), driving one attempt (`runner`, `driver`, `wrapper`, `heartbeat`), and the
ways a run continues or ends (`rerun`, `reconfigure`, `removal`)."""
