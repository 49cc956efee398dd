"""`arbiter bench overhead`: what the full path (gateway + Redis + scheduler) adds.

One run starts a private deployment (Redis, simulated workers at a high speed factor, scheduler,
recorder, gateway), then sends the same streaming load straight to a worker and through the
gateway at each concurrency, and reports the added time to first token (p50/p99 of the
through-path minus the same percentile of the direct path) and the highest sustained
requests/s through the gateway. Results are printed and written as JSON.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from control_plane.bench.load import run_load
from control_plane.up.deploy import Deployment, UpOptions, _free_port

BODY: dict[str, Any] = {
    "model": "tiny-llama",
    "prompt": "Say something short.",
    "max_tokens": 16,
    "ignore_eos": True,
    "stream": True,
}


def measure(concurrencies: list[int], requests: int, workers: int, speed: float) -> dict[str, Any]:
    """Run the comparison; returns the JSON-ready result."""
    state = Path(tempfile.mkdtemp(prefix="arb-bench-"))
    dep = Deployment(
        UpOptions(
            workers=workers,
            speed=speed,
            port=_free_port(),
            console=False,
            database_url=f"sqlite:///{state / 'bench.db'}",
            state_dir=state,
            tenants=["bench"],
        )
    )
    try:
        info = dep.start()
        key = info["tenants"]["bench"]
        direct_url = f"{info['workers'][0]}/v1/completions"
        gw_url = f"{info['gateway_url']}/v1/completions"
        rows = []
        for c in concurrencies:
            n = max(requests, 4 * c)
            direct = asyncio.run(run_load(direct_url, concurrency=c, requests=n, body=BODY))
            full = asyncio.run(
                run_load(
                    gw_url,
                    concurrency=c,
                    requests=n,
                    body=BODY,
                    headers={"Authorization": f"Bearer {key}"},
                )
            )
            row: dict[str, Any] = {
                "concurrency": c,
                "direct": direct.summary(),
                "gateway": full.summary(),
                "added_ttft_p50_ms": (full.pct("ttft", 0.5) - direct.pct("ttft", 0.5)) * 1e3,
                "added_ttft_p99_ms": (full.pct("ttft", 0.99) - direct.pct("ttft", 0.99)) * 1e3,
            }
            rows.append(row)
        return {
            "workers": workers,
            "speed": speed,
            "max_tokens": BODY["max_tokens"],
            "rows": rows,
            "max_sustained_rps": max(float(r["gateway"]["rps"]) for r in rows),
        }
    finally:
        dep.stop()


def write(result: dict[str, Any], out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
