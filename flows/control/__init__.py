"""Run control: a run's life from the command to its recorded outcome — one way through
(`life`: lease → read the run once → admit → join → settle → drive), the Python API
(`api`), the run plan as the engine sees it (`planning`), driving one attempt (`runner`,
`driver`, `live`, `heartbeat`, `timeline`), replacing what a fault took within a budget
(`recovery`), and the ways a run continues or ends (`rerun`, `reconfigure`, `removal`).
Finding the flow (`flows/loader.py`, `flows/registry.py`) and what runs around one task
(`flows/wrapper.py`) sit below this folder, `ray/` and `trust/`, which all use them."""
