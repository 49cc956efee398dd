"""The Redis key space: every key and channel name Arbiter uses, built in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True, slots=True)
class KeySpace:
    """Builds every key of one Arbiter cluster as `arb:{<cluster>}:<name>`.

    The braces are a Redis Cluster hash tag: all keys of a cluster hash to one slot, so every
    multi-key Lua script stays legal on Redis Cluster. No other module spells a key by hand.
    """

    cluster: str

    def __post_init__(self) -> None:
        if not _CLUSTER_NAME.match(self.cluster):
            raise ValueError(f"cluster name must match {_CLUSTER_NAME.pattern}: {self.cluster!r}")

    @property
    def prefix(self) -> str:
        """The common prefix of every key of this cluster (use it with SCAN MATCH prefix*)."""
        return f"arb:{{{self.cluster}}}:"

    def key(self, name: str) -> str:
        """The full key for `name`."""
        return f"{self.prefix}{name}"

    # --- requests -------------------------------------------------------------------------
    def request(self, request_id: str) -> str:
        """Hash of one request: envelope JSON, status, tenant, gateway, attempts, times."""
        return self.key(f"req:{request_id}")

    def released(self, request_id: str) -> str:
        """String: written by `release_lost.lua` with the release, so a gateway that comes back
        after the request's ended hash expired tells its end from a Redis that lost it."""
        return self.key(f"released:{request_id}")

    @property
    def request_prefix(self) -> str:
        """Prefix of request hashes; scripts append a request id to it."""
        return self.key("req:")

    @property
    def seq(self) -> str:
        """Global arrival counter (INCR)."""
        return self.key("seq")

    @property
    def queued(self) -> str:
        """ZSET of queued request ids scored by arrival seq."""
        return self.key("queued")

    @property
    def tenant_queued(self) -> str:
        """Hash tenant → number of queued requests."""
        return self.key("tenant_queued")

    @property
    def inflight(self) -> str:
        """Hash request id → worker id of granted, unfinished requests."""
        return self.key("inflight")

    @property
    def model_queued(self) -> str:
        """Hash model → number of queued requests (the fast lane is closed while > 0)."""
        return self.key("model_queued")

    # --- the fast lane's lent slots (architecture.md §2, "The fast lane") ------------------
    def lent(self, model: str) -> str:
        """Hash worker id → slots of `model` the leader lent and no gateway took yet."""
        return f"{self.lent_prefix}{model}"

    @property
    def lent_prefix(self) -> str:
        """Prefix of the lent-slot hashes; the reclaim script appends a model."""
        return self.key("lent:")

    @property
    def lent_urls(self) -> str:
        """Hash worker id → base URL of the workers slots were lent on."""
        return self.key("lent_urls")

    @property
    def lent_state(self) -> str:
        """Hash `token` (of the leader that lent or reclaimed last; copied into each take),
        `seq` (its last call's number) and `last` (what that call reclaimed, JSON)."""
        return self.key("lent_state")

    @property
    def lent_models(self) -> str:
        """Set of models that have a lent-slot hash (what a new leader reclaims)."""
        return self.key("lent_models")

    # --- streams ---------------------------------------------------------------------------
    @property
    def arrivals(self) -> str:
        """Stream gateway → scheduler: one entry per (re)queued request id."""
        return self.key("arrivals")

    def grants(self, gateway_id: str) -> str:
        """Stream scheduler → one gateway replica."""
        return f"{self.grants_prefix}{gateway_id}"

    @property
    def grants_prefix(self) -> str:
        """Prefix of the grants streams; the grant script appends the request's gateway id."""
        return self.key("grants:")

    @property
    def events(self) -> str:
        """Stream gateway → scheduler and recorder (progress, completion, withdrawals)."""
        return self.key("events")

    @property
    def dead_letters(self) -> str:
        """Stream of entries no consumer could parse or apply (bounded by MAXLEN)."""
        return self.key("dead_letters")

    @property
    def dead_letter_counts(self) -> str:
        """Hash `<consumer>:<reason>` → number of entries ever dead-lettered that way."""
        return self.key("dead_letters:counts")

    def dead_letter_once(self, source: str, entry_id: str) -> str:
        """Marker that an entry of a stream read by id was dead-lettered (expires in a day)."""
        return self.key(f"dead_letters:once:{source}:{entry_id}")

    # --- gateway liveness ------------------------------------------------------------------
    @property
    def gateways(self) -> str:
        """ZSET of gateway replica ids that have heartbeated, scored by their last beat time.

        A member stays after its replica dies (or leaves cleanly) until the leader's sweep has
        released every request the replica left behind; then the sweep removes it.
        """
        return self.key("gateways")

    def gateway_alive(self, gateway_id: str) -> str:
        """String set by each heartbeat with a PX expiry of `gateway_dead_after_s`.

        Its absence while the id is still in `gateways` means the replica is lost (expiry is
        measured by Redis, so the replicas' clocks do not matter).
        """
        return self.key(f"gateway:{gateway_id}:alive")

    # --- leader lease ----------------------------------------------------------------------
    @property
    def leader(self) -> str:
        """String: the lease holder's id, with a PX expiry."""
        return self.key("leader")

    @property
    def leader_epoch(self) -> str:
        """Counter incremented on every acquisition: the fencing token."""
        return self.key("leader:epoch")

    @property
    def leader_info(self) -> str:
        """Hash: holder, token and acquisition time of the latest lease (for operators)."""
        return self.key("leader:info")

    # --- workers, checkpoints, knobs, limits -----------------------------------------------
    @property
    def workers(self) -> str:
        """Set of registered worker ids."""
        return self.key("workers")

    def worker(self, worker_id: str) -> str:
        """Hash of one worker's record; every field value is JSON."""
        return self.key(f"worker:{worker_id}")

    @property
    def worker_metrics(self) -> str:
        """Hash worker id → JSON of its latest scraped metrics."""
        return self.key("worker_metrics")

    def checkpoint(self, name: str) -> str:
        """String: JSON checkpoint `name` (policy, ledger, live, ...)."""
        return self.key(f"ckpt:{name}")

    @property
    def knobs(self) -> str:
        """Hash knob name → JSON value."""
        return self.key("knobs")

    @property
    def knobs_version(self) -> str:
        """Counter incremented on every knob change."""
        return self.key("knobs:version")

    @property
    def knobs_channel(self) -> str:
        """Pub/sub channel announcing knob changes (a channel, not a key)."""
        return self.key("chan:knobs")

    def rate(self, tenant: str) -> str:
        """Hash holding one tenant's token bucket (tokens, last refill time)."""
        return self.key(f"rate:{tenant}")

    def usage_day(self, tenant: str, day: str) -> str:
        """Counter (INCRBY) of the tokens `tenant` consumed on UTC day `day` (`YYYYMMDD`).

        Written by the gateway that served each request, read at the door against the tenant's
        `token_budget`; it expires about two days after its last write.
        """
        return self.key(f"usage:{tenant}:{day}")
