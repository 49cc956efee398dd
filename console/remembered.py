"""Sign-ins that survive a reload: a random session id in a cookie, the token on the server.

Rule: the browser holds only `arbiter_console` = 256 random bits, `SameSite=Strict`, path `/`,
8 hours; the admin token stays in this console process (`SignIns`), keyed by that id. The
token is never in a URL, a cookie or the page. Signing out forgets the id here (so a copied
cookie stops working) and expires the cookie; restarting the console forgets every sign-in.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

COOKIE = "arbiter_console"
TTL_S = 8 * 3600.0
MAX_SIGN_INS = 1_000


@dataclass(frozen=True, slots=True)
class SignIn:
    """A remembered sign-in: the token and who the admin API said it belongs to."""

    token: str
    identity: dict[str, Any]
    expires_at: float


class SignIns:
    """Session id → SignIn, thread-safe (Streamlit runs sessions in threads), each kept for
    `ttl_s`, at most `max_entries` (the oldest are dropped first)."""

    def __init__(self, ttl_s: float = TTL_S, max_entries: int = MAX_SIGN_INS) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: dict[str, SignIn] = {}
        self._lock = threading.Lock()

    def remember(self, token: str, identity: dict[str, Any], now: float | None = None) -> str:
        """A fresh session id for this sign-in."""
        now = time.time() if now is None else now
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._drop_expired(now)
            while len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)))
            self._entries[sid] = SignIn(token, dict(identity), now + self.ttl_s)
        return sid

    def recall(self, sid: str | None, now: float | None = None) -> SignIn | None:
        """The sign-in of `sid`, or None when unknown, forgotten or expired."""
        if not sid:
            return None
        now = time.time() if now is None else now
        with self._lock:
            found = self._entries.get(sid)
            if found is not None and found.expires_at <= now:
                self._entries.pop(sid, None)
                return None
            return found

    def forget(self, sid: str | None) -> None:
        with self._lock:
            self._entries.pop(sid or "", None)

    def _drop_expired(self, now: float) -> None:
        for sid in [s for s, e in self._entries.items() if e.expires_at <= now]:
            del self._entries[sid]


SIGN_INS = SignIns()
"""This console process's sign-ins (module state: shared by every browser session)."""


def cookie_script(sid: str | None, *, secure: bool = False) -> str:
    """JavaScript that sets the session cookie (or expires it, for `sid=None`)."""
    value, age = (sid, int(TTL_S)) if sid else ("", 0)
    flags = "; Secure" if secure else ""
    return (
        f"<script>document.cookie = '{COOKIE}={value}; Path=/; Max-Age={age}; "
        f"SameSite=Strict{flags}';</script>"
    )
