"""Run control: a run's life from the command to its recorded outcome — one way through
(`life`: lease → read the run once → admit → join → settle → drive), the Python API
(`api`), finding the flow (`loader`, `registry`), the run plan as the engine sees it
(`planning`), driving one attempt (`runner`, `driver`, `live`, `wrapper`, `heartbeat`,
`timeline`), replacing what a fault took within a budget (`recovery`), and the ways a run
continues or ends (`rerun`, `reconfigure`, `removal`)."""
