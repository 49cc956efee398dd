"""The failed-auth limiter: token buckets per client IP and global, pure (time is passed in)."""

from __future__ import annotations

from control_plane.gateway.auth_limit import FailedAuthLimiter, TokenBucket


def _limiter(
    ip_rate: float = 1.0, ip_burst: float = 3, global_rate: float = 10.0, global_burst: float = 100
) -> FailedAuthLimiter:
    return FailedAuthLimiter(
        ip_rate=ip_rate, ip_burst=ip_burst, global_rate=global_rate, global_burst=global_burst
    )


def test_an_ip_gets_its_burst_then_waits_for_the_refill() -> None:
    lim = _limiter()
    assert [lim.begin("1.2.3.4", 0.0) for _ in range(4)] == [0, 0, 0, 1]
    assert lim.begin("1.2.3.4", 0.5) == 1  # 0.5 s left, rounded up to whole seconds
    assert lim.begin("1.2.3.4", 1.0) == 0  # one token back, and taken
    assert lim.begin("1.2.3.4", 1.0) == 1
    assert lim.begin("5.6.7.8", 1.0) == 0  # other clients are not affected


def test_refused_attempts_take_nothing() -> None:
    lim = _limiter()
    for _ in range(3):
        lim.begin("a", 0.0)
    for _ in range(100):
        assert lim.begin("a", 0.5) == 1
    assert lim.begin("a", 1.0) == 0


def test_successes_cost_nothing() -> None:
    lim = _limiter(ip_burst=2, global_burst=2)
    for _ in range(1000):
        assert lim.begin("a", 0.0) == 0
        lim.refund("a", 0.0)
    assert lim.begin("a", 0.0) == 0 and lim.begin("b", 0.0) == 0
    assert lim.begin("c", 0.0) == 1  # the global burst is 2


def test_concurrent_lookups_are_bounded_by_the_burst() -> None:
    lim = _limiter(ip_burst=5)
    started = [lim.begin("a", 0.0) for _ in range(100)]  # none finished yet
    assert started.count(0) == 5


def test_retry_after_is_the_longer_of_both_waits() -> None:
    lim = _limiter(ip_rate=0.1, ip_burst=1)
    lim.begin("a", 0.0)
    assert lim.begin("a", 0.0) == 10


def test_the_global_bucket_stops_many_ips_together() -> None:
    lim = _limiter(global_rate=1.0, global_burst=5)
    for i in range(5):
        assert lim.begin(f"10.0.0.{i}", 0.0) == 0
    assert lim.begin("10.0.0.99", 0.0) == 1  # a fresh IP, but the gateway is over
    assert lim.begin("10.0.0.99", 1.0) == 0


def test_ip_buckets_are_bounded() -> None:
    lim = FailedAuthLimiter(ip_rate=1, ip_burst=1, global_rate=0, global_burst=1, max_clients=50)
    for i in range(10_000):
        lim.begin(f"ip-{i}", float(i) / 1000)
    assert len(lim) == 50
    assert lim.begin("ip-9999", 10.0) == 1  # recent ones are remembered


def test_rate_zero_disables_a_limit() -> None:
    lim = FailedAuthLimiter(ip_rate=0, ip_burst=1, global_rate=0, global_burst=1)
    assert all(lim.begin("a", 0.0) == 0 for _ in range(1000))
    assert len(lim) == 0


def test_bucket_never_exceeds_burst_or_goes_negative() -> None:
    b = TokenBucket.full(2.0, 4.0, 0.0)
    for _ in range(10):
        b.take(0.0)
    assert b.tokens == 0.0
    assert b.wait_s(0.0) == 0.5
    b.give(0.0)
    assert b.tokens == 1.0
    assert b.wait_s(100.0) == 0.0 and b.tokens == 4.0
    b.give(100.0)
    assert b.tokens == 4.0
