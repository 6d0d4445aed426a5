"""The trust boundary: a store is data, and nothing it names acts outside it without this
machine's say-so.

    sayso.py   what this machine confirms (command line, trusted places, the trust file,
               --trust-store)
    signing.py run.json's trust records signed with this machine's key: a record that
               verifies is this machine's own say-so; any other is the store's word alone
    check.py   a stored run's references (code, flows, URLs, write folders, Ray address)
               confirmed into what this process may run, or refused one line each
    flow.py    loading the flow a stored run names
"""

from alignflow.flows.trust.check import (
           Context,
           Untrusted,
           check,
           check_address,
           record_of,
           recorded_hashes,
)
from alignflow.flows.trust.flow import stored_flow
from alignflow.flows.trust.sayso import Sayso, active, in_force, local_sayso

__all__ = ["Context", "Sayso", "Untrusted", "active", "check", "check_address", "in_force",
           "local_sayso", "record_of", "recorded_hashes", "stored_flow"]
