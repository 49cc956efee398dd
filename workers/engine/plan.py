"""Per-request engine state and the plan of one step, shared by the scheduler and the engine."""

from __future__ import annotations

from workers.engine.step import EngineRequest, TokenEvent

WAITING, RUNNING, DONE = 0, 1, 2
PARTIAL, PREFILLED, DECODED = 0, 1, 2  # what a request did in the planned step


class Seq:
    """Mutable engine-side state of one request."""

    __slots__ = (
        "arrival",
        "blocks",
        "computed",
        "generated",
        "id",
        "key",
        "last_kind",
        "last_n",
        "last_step",
        "n_in",
        "n_out",
        "num_tokens",
        "preemptions",
        "priority",
        "state",
        "tick",
    )

    def __init__(self, req: EngineRequest, order: int) -> None:
        self.id = req.id
        self.n_in = req.n_in
        self.n_out = req.n_out
        self.priority = req.priority
        self.arrival = req.arrival
        self.key = (req.priority, req.arrival, req.id, order)
        self.num_tokens = req.n_in  # prompt + generated: what must be in KV before the next sample
        self.computed = 0
        self.generated = 0
        self.blocks = 0
        self.state = WAITING
        self.preemptions = 0
        self.tick = TokenEvent(req.id, 1, False, False)  # shared by every plain decode token
        self.last_step = -1
        self.last_n = 0
        self.last_kind = PARTIAL


class Plan:
    """What one step will do, fixed when it starts."""

    __slots__ = (
        "aborted",
        "decode_ctx",
        "decode_seqs",
        "events",
        "finishing",
        "firsts",
        "number",
        "preempted",
        "prefill_tokens",
        "restored",
    )

    def __init__(self, number: int) -> None:
        self.number = number
        self.events: list[TokenEvent] = []
        self.finishing: list[Seq] = []
        self.firsts: list[Seq] = []
        self.preempted: list[str] = []
        self.aborted: set[str] = set()
        self.prefill_tokens = 0
        self.decode_seqs = 0
        self.decode_ctx = 0
        self.restored = 0  # budget given back by unscheduling a preempted request

    def take_restored(self) -> int:
        n, self.restored = self.restored, 0
        return n
