"""A rate limit on failed authentication, per client IP and for the whole gateway replica.

Rule (what `current_tenant` applies):

- A key this gateway has *vouched for* (seen valid within the directory's trust window) skips
  this limiter: a tenant sharing a NAT with a bad client, or calling during a distributed
  key-guessing attack, keeps working.
- Any other key takes one token from its client IP's bucket and one from the global bucket
  before it is looked up (cache or SQL), and gets both back if it turns out valid: failures
  cost tokens, successes cost nothing. With no token to take it is refused with 429
  `too_many_auth_failures` and `Retry-After`, without any lookup. Requests presenting a key
  whose charged lookup is already in flight join it without a charge of their own, so a burst
  of concurrent first calls with one valid key costs one token (refunded), not one each.

So unknown keys reach SQL at most `burst + rate × t` times per IP and per gateway over `t`
seconds, however many arrive at once. A valid key never seen on this gateway is refused only
while failures have emptied a bucket (or `burst` unseen keys are being looked up at that very
moment); it passes once tokens refill.

Why in-process rather than Redis: the goal is to protect this replica's memory and SQL, and a
Redis round trip per failure would hand an unauthenticated attacker a lever on the store that
the scheduler and every tenant depend on. The price: with N replicas behind a load balancer the
effective limits are N times the configured ones. The client IP is the ASGI peer address; behind
a reverse proxy run uvicorn with `--forwarded-allow-ips` so it is the real client, never an
`X-Forwarded-For` header the gateway would have to trust blindly.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from control_plane.settings import Settings


@dataclass(slots=True)
class TokenBucket:
    """`rate` tokens per second up to `burst`; starts full. Pure: callers pass `now`."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    @classmethod
    def full(cls, rate: float, burst: float, now: float) -> TokenBucket:
        return cls(rate, burst, burst, now)

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.stamp)
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.stamp = max(self.stamp, now)

    def wait_s(self, now: float) -> float:
        """Seconds until one token is available (0 when one is)."""
        self.refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self.refill(now)
        self.tokens = max(0.0, self.tokens - 1.0)

    def give(self, now: float) -> None:
        self.refill(now)
        self.tokens = min(self.burst, self.tokens + 1.0)


class FailedAuthLimiter:
    """Token buckets of failed authentications per client IP and global (see module docstring).

    At most `max_clients` IP buckets are kept (least recently failing evicted first): evicting
    one forgives that IP, which the global bucket still bounds. A rate of 0 disables a limit.
    """

    def __init__(
        self,
        *,
        ip_rate: float,
        ip_burst: float,
        global_rate: float,
        global_burst: float,
        max_clients: int = 10_000,
    ) -> None:
        self.ip_rate, self.ip_burst = ip_rate, max(1.0, ip_burst)
        self.max_clients = max_clients
        self._ips: OrderedDict[str, TokenBucket] = OrderedDict()
        self._global: TokenBucket | None = None
        if global_rate > 0:
            self._global = TokenBucket.full(global_rate, max(1.0, global_burst), float("-inf"))

    @classmethod
    def for_settings(cls, settings: Settings) -> FailedAuthLimiter:
        (ip_rate, ip_burst), (global_rate, global_burst) = (
            settings.auth_failures_per_ip,
            settings.auth_failures_global,
        )
        return cls(
            ip_rate=ip_rate,
            ip_burst=ip_burst,
            global_rate=global_rate,
            global_burst=global_burst,
            max_clients=settings.directory_cache_entries,
        )

    def __len__(self) -> int:
        """IP buckets held."""
        return len(self._ips)

    def begin(self, ip: str, now: float) -> int:
        """Before looking up a key not vouched for: 0 and one token taken from `ip` and from the
        gateway (see `refund`), or the whole seconds to wait and nothing taken."""
        bucket = self._bucket(ip, now)
        wait = 0.0 if bucket is None else bucket.wait_s(now)
        if self._global is not None:
            wait = max(wait, self._global.wait_s(now))
        if wait > 0:
            return max(1, math.ceil(wait))
        for b in (bucket, self._global):
            if b is not None:
                b.take(now)
        return 0

    def refund(self, ip: str, now: float) -> None:
        """The lookup after `begin` did not fail authentication (the key was valid, or the
        lookup itself failed): give both tokens back."""
        bucket = self._ips.get(ip) if self.ip_rate > 0 else None
        for b in (bucket, self._global):
            if b is not None:
                b.give(now)

    def _bucket(self, ip: str, now: float) -> TokenBucket | None:
        if self.ip_rate <= 0:
            return None
        bucket = self._ips.get(ip)
        if bucket is None:
            bucket = self._ips[ip] = TokenBucket.full(self.ip_rate, self.ip_burst, now)
            while len(self._ips) > self.max_clients:
                self._ips.popitem(last=False)
        self._ips.move_to_end(ip)
        return bucket
