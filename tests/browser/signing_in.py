"""The admin API straight from the test (not through the console's client), and signing in to
the console as a fresh named operator: shared by the browser tests."""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from tests.browser.chromium import ConsolePage
from tests.browser.deployment import UpInfo


def admin_get(info: UpInfo, path: str, **params: str) -> Any:
    """One admin API call, straight to the gateway (not through the console's client)."""
    resp = httpx.get(
        f"{info.gateway_url}/admin{path}",
        params=params,
        headers={"Authorization": f"Bearer {info.admin_token}"},
        timeout=10.0,
    )
    resp.raise_for_status()
    return resp.json()


def new_operator(info: UpInfo) -> tuple[str, str]:
    """A named operator (role operator) created with the admin token → (name, its token)."""
    name = f"olga-{secrets.token_hex(3)}"
    resp = httpx.post(
        f"{info.gateway_url}/admin/operators",
        json={"name": name, "role": "operator", "reason": "browser test operator"},
        headers={"Authorization": f"Bearer {info.admin_token}"},
        timeout=10.0,
    )
    resp.raise_for_status()
    return name, str(resp.json()["token"])


def sign_in(console: ConsolePage, info: UpInfo, shots: str = "01") -> str:
    """Sign in as a new named operator; a reload and a deep link keep the sign-in. The
    screenshots' names start with `shots`."""
    name, operator_token = new_operator(info)
    page = console.page
    page.goto(info.console_url)
    token = page.get_by_label("Admin token", exact=True)
    token.wait_for(timeout=60_000)
    page.get_by_text(f"Admin API: {info.gateway_url}", exact=True).wait_for()
    assert page.get_by_label("Admin API URL").count() == 0  # fixed by `arbiter up`, not typed
    token.fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("The admin API refused the token").wait_for()
    console.shot(f"{shots}-sign-in-refused")
    token.fill(operator_token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Live", exact=True).wait_for()
    page.get_by_text(f"Signed in as {name} (role operator)").wait_for()
    page.reload()
    page.get_by_role("heading", name="Live", exact=True).wait_for()
    page.goto(f"{info.console_url}/workers")
    page.get_by_role("heading", name="Workers", exact=True).wait_for()
    console.shot(f"{shots}b-deep-link-signed-in")
    page.goto(info.console_url)
    page.get_by_role("heading", name="Live", exact=True).wait_for()
    assert operator_token not in page.url and info.admin_token not in page.url
    return name
