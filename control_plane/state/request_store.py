"""Request envelopes and their lifecycle: queued → granted → finished (or withdrawn)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

from redis.asyncio import Redis

from control_plane.contracts.events import Complete, encode
from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import (
    Envelope,
    encode_envelope,
)
from control_plane.state.client import check_client
from control_plane.state.codec import dumps, text, time_arg
from control_plane.state.errors import StaleLeader, guarded
from control_plane.state.keys import KeySpace
from control_plane.state.request_reads import LOAD_CHUNK, RequestReads
from control_plane.state.request_results import Abandoned, GrantOrder, SubmitResult
from control_plane.state.scripts import Command, ScriptArg, Scripts

FINAL_STATUSES: Final = frozenset({"ok", "error", "aborted", "timeout"})
"""Statuses `finish` accepts; `withdrawn` is set only by the scripts that take a request out of
the queue (`withdraw`, `release_lost`) and by `abandon`'s tombstone."""
RELEASED_TTL_S: Final = 86_400
"""How long a lost gateway's released request keeps its tombstone (`KeySpace.released`): far
beyond any wait a gateway gives a request (`queue_timeout_s`), so one that comes back after the
ended hash expired still finds it; one small key per request released as a lost replica's."""
_GRANT_CHUNK: Final = 256
"""Grants per script call: long enough to amortise the round trip, short enough that Redis
is never held for long by one call."""


class RequestStore(RequestReads):
    """Owns the request hashes, the `queued` ZSET, per-tenant queue depths and `inflight`.

    Every state change is one Lua script (one round trip) and checks the current status first,
    so concurrent gateways and the scheduler cannot double-grant, lose or double-count a
    request: a request is granted at most once per attempt, withdrawn only while queued,
    re-queued at its original arrival seq at most `max_attempts - 1` times, and released for a
    lost gateway (`release_lost`) only while queued or granted and that gateway is still lost.
    Each change is idempotent, so the client's retry of a call whose reply was lost is harmless.

    Memory: an ended request's hash is kept `retention_s` (a safety net while nothing has
    recorded it), and only `recorded_retention_s` once the recorder has committed its row
    (`mark_recorded`) — long enough for any retried call, short enough that Redis holds only
    the requests of the last minute or so. Live (queued, granted) hashes never expire.
    """

    def __init__(
        self,
        redis: Redis,
        keyspace: KeySpace,
        *,
        retention_s: int = 3600,
        recorded_retention_s: int = 60,
        max_attempts: int = 2,
        arrivals_maxlen: int = 100_000,
        grants_maxlen: int = 10_000,
        events_maxlen: int = 1_000_000,
    ) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)
        self.retention_s = retention_s
        self.recorded_retention_s = recorded_retention_s
        self.max_attempts = max_attempts
        self._arrivals_maxlen = arrivals_maxlen
        self._grants_maxlen = grants_maxlen
        self._events_maxlen = events_maxlen

    @guarded
    async def submit(
        self,
        envelope: Envelope,
        *,
        request_id: str,
        tenant: str,
        gateway_id: str,
        queue_cap: int,
        now: float,
        fast: bool = False,
    ) -> SubmitResult:
        """Store and queue a request unless `tenant` already has `queue_cap` queued; with
        `fast`, grant it at once instead on a slot lent for its model when none is queued."""
        ks = self._ks
        model = envelope.job.model
        outcome, seq, depth, worker, url = await self._scripts.call(
            "submit",
            [
                *(ks.request(request_id), ks.seq, ks.queued, ks.tenant_queued, ks.arrivals),
                *(ks.model_queued, ks.inflight, ks.lent(model), ks.lent_urls, ks.lent_state),
                *(ks.gateway_alive(gateway_id), ks.gateways),
            ],
            [
                request_id,
                tenant,
                gateway_id,
                dumps(encode_envelope(envelope)),
                queue_cap,
                time_arg(now),
                self._arrivals_maxlen,
                model,
                "1" if fast else "0",
            ],
        )
        taken = outcome == "granted"
        fast_grant = Grant(request_id, text(worker), text(url), now) if taken else None
        return SubmitResult(
            accepted=outcome != "rejected",
            seq=int(seq),
            depth=int(depth),
            duplicate=outcome == "duplicate",
            grant=fast_grant,
        )

    @guarded
    async def abandon(self, request_id: str, *, gateway_id: str, now: float) -> Abandoned:
        """Make a `submit` that failed without an answer definite (`abandon.lua`): an unknown
        id gets a tombstone, so the call cannot take effect later; a known one is reported."""
        outcome, worker, url = await self._scripts.call(
            "abandon",
            [self._ks.request(request_id)],
            [request_id, time_arg(now), gateway_id, self.retention_s],
        )
        state = text(outcome)
        taken = Grant(request_id, text(worker), text(url), now) if state == "taken" else None
        return Abandoned(state, taken)

    @guarded
    async def grant(
        self,
        request_id: str,
        *,
        worker_id: str,
        worker_url: str,
        now: float,
        fencing_token: int | None = None,
    ) -> bool:
        """Grant a queued request to a worker; False when it is no longer queued (drop it).

        With `fencing_token`, the grant happens only while it is the lease's latest token, in
        the same script: a deposed leader raises `StaleLeader` and changes nothing."""
        ks = self._ks
        fence = "" if fencing_token is None else str(fencing_token)
        result = int(
            await self._scripts.call(
                "grant",
                [
                    ks.request(request_id),
                    ks.queued,
                    ks.tenant_queued,
                    ks.inflight,
                    ks.grants_prefix,
                    ks.leader_epoch,
                    ks.model_queued,
                ],
                [request_id, worker_id, worker_url, time_arg(now), self._grants_maxlen, fence],
            )
        )
        if result < 0:
            raise StaleLeader(f"fencing token {fencing_token} is stale: another scheduler leads")
        return result > 0

    @guarded
    async def grant_many(
        self,
        orders: Sequence[GrantOrder],
        *,
        now: float,
        fencing_token: int | None = None,
        policy: str | None = None,
    ) -> list[bool]:
        """`grant` for a whole scheduler cycle, one script call per `_GRANT_CHUNK` orders: per
        order, True when granted, False when no longer queued (drop it). The fencing token is
        checked once per call; a deposed leader raises `StaleLeader` (a later chunk of a long
        batch may raise after earlier ones were granted, as a run of single grants would).
        `policy`, the ordering policy that decided the cycle, goes on each grant entry."""
        fence = "" if fencing_token is None else str(fencing_token)
        out: list[bool] = []
        for start in range(0, len(orders), _GRANT_CHUNK):
            chunk = orders[start : start + _GRANT_CHUNK]
            out += await self._grant_chunk(chunk, now, fence, policy or "")
        return out

    async def _grant_chunk(
        self, orders: Sequence[GrantOrder], now: float, fence: str, policy: str
    ) -> list[bool]:
        ks = self._ks
        keys = [ks.queued, ks.tenant_queued, ks.inflight, ks.grants_prefix, ks.leader_epoch]
        keys.append(ks.model_queued)
        keys += [ks.request(o.request_id) for o in orders]
        args: list[str | int] = [time_arg(now), self._grants_maxlen, fence, policy]
        for o in orders:
            args += [o.request_id, o.worker_id, o.worker_url]
        result = await self._scripts.call("grant_many", keys, args)
        if not isinstance(result, list):
            raise StaleLeader(f"fencing token {fence} is stale: another scheduler leads")
        return [int(r) > 0 for r in result]

    @guarded
    async def withdraw(
        self, request_id: str, *, now: float, reason: str, envelope: Envelope | None = None
    ) -> bool:
        """Withdraw a queued request; False when it was granted (or ended) meanwhile. The
        `withdrawn` event carries `envelope` (what the caller submitted), from which the
        recorder writes the request's row: without it, no row."""
        ks = self._ks
        carried = dumps(encode_envelope(envelope)) if envelope is not None else ""
        result = await self._scripts.call(
            "withdraw",
            [ks.request(request_id), ks.queued, ks.tenant_queued, ks.events, ks.model_queued],
            [
                request_id,
                time_arg(now),
                reason,
                self.retention_s,
                self._events_maxlen,
                self.recorded_retention_s,
                carried,
            ],
        )
        return bool(result)

    @guarded
    async def requeue(self, request_id: str, *, now: float) -> bool:
        """Put a granted request back at its original place; False when no attempt is left."""
        ks = self._ks
        result = await self._scripts.call(
            "requeue",
            [
                *(ks.request(request_id), ks.queued, ks.tenant_queued, ks.inflight),
                *(ks.arrivals, ks.model_queued),
            ],
            [request_id, time_arg(now), self.max_attempts, self._arrivals_maxlen],
        )
        return bool(result)

    @guarded
    async def finish(self, request_id: str, *, now: float, status: str) -> bool:
        """Record the final status (ok, error, aborted, timeout) and free the in-flight slot.

        True when the request now has `status` (also on a repeated call); False when it is
        unknown or already ended otherwise. The hash expires after `retention_s`.
        """
        return (await self._finish_chunk([(request_id, status)], now))[0]

    @guarded
    async def finish_many(self, items: Sequence[tuple[str, str]], *, now: float) -> list[bool]:
        """`finish` for many `(request id, status)` items, one script call per `_GRANT_CHUNK`;
        per item, what `finish` would answer."""
        out: list[bool] = []
        for start in range(0, len(items), _GRANT_CHUNK):
            out += await self._finish_chunk(items[start : start + _GRANT_CHUNK], now)
        return out

    async def _finish_chunk(self, items: Sequence[tuple[str, str]], now: float) -> list[bool]:
        result = await self._scripts.call("finish", *self._finish_call(items, now, False))
        return [int(r) > 0 for r in result]

    def finish_commands(self, items: Sequence[tuple[str, str]], *, now: float) -> list[Command]:
        """The commands `finish_many` sends (EVALSHA, one per `_GRANT_CHUNK`), for a caller
        that sends them after the requests' events in one transaction (`Completions`): each
        marks nothing, and fails, unless the events key is a stream once they run."""
        chunks = [items[i : i + _GRANT_CHUNK] for i in range(0, len(items), _GRANT_CHUNK)]
        return [self._scripts.command("finish", *self._finish_call(c, now, True)) for c in chunks]

    def _finish_call(
        self, items: Sequence[tuple[str, str]], now: float, after_events: bool
    ) -> tuple[list[str], list[ScriptArg]]:
        for _, status in items:
            if status not in FINAL_STATUSES:
                raise ValueError(
                    f"final status must be one of {sorted(FINAL_STATUSES)}: {status!r}"
                )
        ks = self._ks
        keys = [ks.queued, ks.tenant_queued, ks.inflight, ks.model_queued, ks.events]
        keys += [ks.request(request_id) for request_id, _ in items]
        args: list[ScriptArg] = [time_arg(now), self.retention_s, self.recorded_retention_s]
        args.append(1 if after_events else 0)
        for request_id, status in items:
            args += [request_id, status]
        return keys, args

    @guarded
    async def mark_recorded(self, request_ids: Collection[str]) -> int:
        """The recorder committed these requests' rows: their hashes expire after
        `recorded_retention_s` once ended (see `recorded.lua`); → how many now do."""
        keys = [self._ks.request(i) for i in dict.fromkeys(request_ids)]
        total = 0
        for start in range(0, len(keys), LOAD_CHUNK):
            chunk = keys[start : start + LOAD_CHUNK]
            total += int(await self._scripts.call("recorded", chunk, [self.recorded_retention_s]))
        return total

    @guarded
    async def release_lost(
        self,
        request_id: str,
        *,
        gateway_id: str,
        now: float,
        reason: str,
        if_queued: Complete,
        if_granted: Complete,
    ) -> str | None:
        """End a request of the lost replica `gateway_id` (see `release_lost.lua`).

        A queued request is withdrawn and `if_queued` appended to `events`; a granted one is
        aborted, its in-flight entry freed, and `if_granted` appended. Returns the new status
        (`withdrawn` or `aborted`), or None when nothing changed: the replica is alive again,
        the request is not its own, or it is no longer queued or granted.
        """
        ks = self._ks
        result = await self._scripts.call(
            "release_lost",
            [
                ks.request(request_id),
                ks.queued,
                ks.tenant_queued,
                ks.inflight,
                ks.gateway_alive(gateway_id),
                ks.events,
                ks.model_queued,
                ks.released(request_id),
            ],
            [
                request_id,
                gateway_id,
                time_arg(now),
                reason,
                self.retention_s,
                self._events_maxlen,
                dumps(encode(if_queued)),
                dumps(encode(if_granted)),
                RELEASED_TTL_S,
            ],
        )
        return text(result) or None
