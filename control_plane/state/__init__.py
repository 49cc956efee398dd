"""The only code that touches Redis: key space, Lua scripts and typed stores.

Every outage-type Redis error leaves this package as `StateUnavailable`.
May import: `control_plane.contracts` (the messages it stores) and nothing else of the project.
"""

from control_plane.contracts.workers import WORKER_STATUSES
from control_plane.state.arrivals import ArrivalsConsumer
from control_plane.state.budget import TokenBudgets
from control_plane.state.checkpoints import Checkpoint
from control_plane.state.client import connect, ping, server_pid, server_run_id
from control_plane.state.dead_letters import DeadLetter, DeadLetters
from control_plane.state.errors import KnobChanged, StaleLeader, StateUnavailable
from control_plane.state.events import EventStream
from control_plane.state.fast_lane import LentSlots
from control_plane.state.gateways import GatewayRegistry
from control_plane.state.grants import GrantStream
from control_plane.state.keys import KeySpace
from control_plane.state.knobs import Knobs, KnobSubscription
from control_plane.state.lease import LeaderLease
from control_plane.state.live_history import HistoryPoint, HistorySample, LiveHistory
from control_plane.state.rate_limit import RateLimiter
from control_plane.state.request_results import GrantOrder, SubmitResult
from control_plane.state.request_store import FINAL_STATUSES, RequestStore
from control_plane.state.sentinel import SentinelTarget, sentinel_of
from control_plane.state.stores import StateStores
from control_plane.state.trimming import StreamTrimmer
from control_plane.state.worker_registry import WorkerRegistry

__all__ = [
    "FINAL_STATUSES",
    "WORKER_STATUSES",
    "ArrivalsConsumer",
    "Checkpoint",
    "DeadLetter",
    "DeadLetters",
    "EventStream",
    "GatewayRegistry",
    "GrantOrder",
    "GrantStream",
    "HistoryPoint",
    "HistorySample",
    "KeySpace",
    "KnobChanged",
    "KnobSubscription",
    "Knobs",
    "LeaderLease",
    "LentSlots",
    "LiveHistory",
    "RateLimiter",
    "RequestStore",
    "SentinelTarget",
    "StaleLeader",
    "StateStores",
    "StateUnavailable",
    "StreamTrimmer",
    "SubmitResult",
    "TokenBudgets",
    "WorkerRegistry",
    "connect",
    "ping",
    "sentinel_of",
    "server_pid",
    "server_run_id",
]
