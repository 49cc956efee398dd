"""A small real HTTP server standing in for vLLM's API server in supervisor tests.

It accepts vLLM's command line (`-m vllm.entrypoints.openai.api_server --model M --host H
--port P ...`, unknown arguments ignored) so a wrapper script can pose as vLLM's interpreter.
It serves `GET /health` and appends its life events to `$CHILD_STATE` as lines
`start PID TIME`, `grandchild PID`, `term PID`. Behaviour, from the environment:

- `CHILD_EXIT_AFTER=S`: exit with code 3, S seconds after starting to serve;
- `CHILD_UNHEALTHY_AFTER=S`: `/health` answers 503 from S seconds after starting;
- `CHILD_IGNORE_TERM=1`: ignore SIGTERM (only SIGKILL stops it);
- `CHILD_GRANDCHILD=1`: start a `sleep` grandchild, as vLLM starts its engine processes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

STARTED = time.monotonic()


def record(line: str) -> None:
    state = os.environ.get("CHILD_STATE")
    if state:
        with Path(state).open("a") as f:
            f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        unhealthy_after = float(os.environ.get("CHILD_UNHEALTHY_AFTER", "inf"))
        healthy = time.monotonic() - STARTED < unhealthy_after
        status = 200 if self.path == "/health" and healthy else 503
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    record(f"start {os.getpid()} {time.time():.3f}")
    if os.environ.get("CHILD_GRANDCHILD") == "1":
        grandchild = subprocess.Popen(["sleep", "300"])
        record(f"grandchild {grandchild.pid}")

    def on_term(signum: int, frame: FrameType | None) -> None:
        record(f"term {os.getpid()}")
        if os.environ.get("CHILD_IGNORE_TERM") != "1":
            threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, on_term)
    exit_after = os.environ.get("CHILD_EXIT_AFTER")
    if exit_after:
        threading.Timer(float(exit_after), lambda: os._exit(3)).start()
    server.serve_forever(poll_interval=0.05)
    sys.exit(0)


if __name__ == "__main__":
    main()
