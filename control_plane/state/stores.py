"""One object holding a Redis client and every store built on it."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from control_plane.state.arrivals import ArrivalsConsumer
from control_plane.state.budget import TokenBudgets
from control_plane.state.checkpoints import Checkpoint
from control_plane.state.client import connect
from control_plane.state.completions import Completions
from control_plane.state.dead_letters import DeadLetters
from control_plane.state.errors import guarded
from control_plane.state.events import EventStream
from control_plane.state.fast_lane import LentSlots
from control_plane.state.gateways import GatewayRegistry
from control_plane.state.grants import GrantStream
from control_plane.state.inflight_view import InflightReader
from control_plane.state.keys import KeySpace
from control_plane.state.knobs import Knobs
from control_plane.state.lease import LeaderLease
from control_plane.state.live_history import LiveHistory
from control_plane.state.rate_limit import RateLimiter
from control_plane.state.request_store import RequestStore
from control_plane.state.scripts import Scripts
from control_plane.state.sentinel import SentinelTarget
from control_plane.state.trimming import StreamTrimmer
from control_plane.state.worker_registry import WorkerRegistry


@dataclass(frozen=True, slots=True)
class StateStores:
    """Every store of one cluster, sharing one client (and its connection pool).

    Build it where a process starts (`StateStores.open(settings.redis_url, settings.cluster)`)
    and close it on shutdown; nothing connects until the first command.
    """

    redis: Redis
    keyspace: KeySpace
    requests: RequestStore
    arrivals: ArrivalsConsumer
    grants: GrantStream
    events: EventStream
    lease: LeaderLease
    workers: WorkerRegistry
    checkpoints: Checkpoint
    knobs: Knobs
    rate_limiter: RateLimiter
    token_budgets: TokenBudgets
    gateways: GatewayRegistry
    dead_letters: DeadLetters
    trimmer: StreamTrimmer
    live_history: LiveHistory
    lending: LentSlots
    completions: Completions
    inflight: InflightReader

    @classmethod
    def build(cls, redis: Redis, keyspace: KeySpace, *, replicated: bool = False) -> StateStores:
        """Stores over an existing client (made by `connect`: it must decode responses).

        `replicated`: Redis has a replica that a fail-over promotes (Sentinel), so the lease
        waits for one replica to hold each new fencing token (see `LeaderLease`) and event
        publishers for one to hold their events (see `EventStream`).
        """
        acks = 1 if replicated else 0
        requests = RequestStore(redis, keyspace)
        events = EventStream(redis, keyspace, replica_acks=acks)
        return cls(
            redis=redis,
            keyspace=keyspace,
            requests=requests,
            arrivals=ArrivalsConsumer(redis, keyspace),
            grants=GrantStream(redis, keyspace),
            events=events,
            lease=LeaderLease(redis, keyspace, replica_acks=acks),
            workers=WorkerRegistry(redis, keyspace),
            checkpoints=Checkpoint(redis, keyspace),
            knobs=Knobs(redis, keyspace),
            rate_limiter=RateLimiter(redis, keyspace),
            token_budgets=TokenBudgets(redis, keyspace),
            gateways=GatewayRegistry(redis, keyspace),
            dead_letters=DeadLetters(redis, keyspace),
            trimmer=StreamTrimmer.for_cluster(redis, keyspace),
            live_history=LiveHistory(redis, keyspace),
            lending=LentSlots(redis, keyspace),
            completions=Completions(redis, events, requests),
            inflight=InflightReader(redis, keyspace),
        )

    @classmethod
    def open(
        cls,
        url: str,
        cluster: str,
        *,
        client_name: str | None = None,
        sentinel: SentinelTarget | None = None,
        multiplex: bool = True,
    ) -> StateStores:
        """Stores over a new client for `url`, or for the primary `sentinel` names (see
        `connect`; `multiplex`: the scripts share one pipelined connection)."""
        client = connect(url, client_name=client_name, sentinel=sentinel, multiplex=multiplex)
        return cls.build(client, KeySpace(cluster), replicated=sentinel is not None)

    @guarded
    async def preload_scripts(self) -> None:
        """SCRIPT LOAD every Lua script now, so the first calls skip the NOSCRIPT detour."""
        await Scripts(self.redis).load_all()

    async def aclose(self) -> None:
        """Close the client and its connection pool."""
        await self.redis.aclose()
