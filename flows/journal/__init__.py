"""The journal: what a run leaves in the store and how it is read back — run metadata and
statuses (`runs`), the driver lease (`lease`, `procinfo`), durable timers, the ordered
commit queue, the JSON codec of records, identities and code hashes, the progress log."""
