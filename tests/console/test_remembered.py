"""Remembered sign-ins: a random id maps to the token on the server, expires, is forgotten on
sign-out, and the store stays bounded; the cookie carries the id, never the token."""

from __future__ import annotations

from console.remembered import COOKIE, SignIns, cookie_script


def test_recall_until_expiry_or_sign_out() -> None:
    store = SignIns(ttl_s=10.0)
    sid = store.remember("secret-token", {"name": "ann", "role": "viewer"}, now=100.0)
    assert len(sid) >= 40 and "secret-token" not in sid
    found = store.recall(sid, now=105.0)
    assert found is not None and found.token == "secret-token"
    assert found.identity["name"] == "ann"
    assert store.recall(sid, now=110.0) is None  # expired
    again = store.remember("secret-token", {}, now=200.0)
    store.forget(again)
    assert store.recall(again, now=201.0) is None
    assert store.recall("guessed", now=201.0) is None and store.recall(None) is None


def test_store_is_bounded() -> None:
    store = SignIns(ttl_s=100.0, max_entries=3)
    sids = [store.remember(f"t{i}", {}, now=float(i)) for i in range(5)]
    assert [store.recall(s, now=10.0) is not None for s in sids] == [False, False, True, True, True]


def test_cookie_holds_the_id_and_can_be_expired() -> None:
    assert f"{COOKIE}=abc; Path=/; Max-Age=28800; SameSite=Strict" in cookie_script("abc")
    assert "Secure" in cookie_script("abc", secure=True)
    assert f"{COOKIE}=; Path=/; Max-Age=0" in cookie_script(None)
