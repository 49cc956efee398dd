"""WFQ — weighted fair queueing, realised as weighted VTC (docs/algorithms.md §2, H-MAS pool)."""

from __future__ import annotations

from typing import ClassVar

from control_plane.policies.vtc import VtcPolicy


class WfqPolicy(VtcPolicy):
    """Weighted VTC under the name the H-MAS pool uses ("WFQ/Stride").

    Same ordering and guarantee as `vtc`: clients share service in proportion to their
    weights, and two backlogged clients' weighted service differs by at most
    `2 · max(w_p · L_in, w_q · M)` over any interval. Counters are shared with `vtc` in the
    ledger, so switching between the two is seamless.
    """

    name: ClassVar[str] = "wfq"
