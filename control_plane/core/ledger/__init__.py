"""The ledger: service, SLO windows, virtual counters and credits per node of the hierarchy.

Nodes are path prefixes: `("t",)` a tenant, `("t", "app")` an application, `("t", "app",
"agent")` an agent. The dispatcher charges every prefix of a job's path as the job runs, so
service is known at every level whatever policy is active. Counter-based policies (VTC, WFQ,
HMFS) and ExFairS keep their fairness memory here rather than inside the policy object, which
is what lets that memory survive a policy switch or a scheduler fail-over (JSON snapshot).

Modules by concern: `records` (one node's totals and windows), `service` (charges, windows,
the deferred-charge speed-up), `counters` (virtual counters, backlog, lift memory), `accounts`
(ExFairS credits) and `ledger` (the `Ledger` facade and its snapshot).
May import: `control_plane.core.job` and `control_plane.core.windows` only.
"""

from control_plane.core.ledger.accounts import Account
from control_plane.core.ledger.counters import COUNTER_BACKLOG, CounterCell
from control_plane.core.ledger.ledger import Ledger
from control_plane.core.ledger.records import Node, NodeStats, WindowStats, group_of, prefixes
from control_plane.core.ledger.service import CounterPlan, OutputCharge, WeightTable

__all__ = [
    "COUNTER_BACKLOG",
    "Account",
    "CounterCell",
    "CounterPlan",
    "Ledger",
    "Node",
    "NodeStats",
    "OutputCharge",
    "WeightTable",
    "WindowStats",
    "group_of",
    "prefixes",
]
