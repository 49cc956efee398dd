"""What `arbiter up` checks in its options before it starts anything."""

from __future__ import annotations

from control_plane.core.cli_errors import is_file, unwritable
from control_plane.policies.registry import UnknownPolicyError, policy_class
from control_plane.up.deploy import UpOptions
from storage.errors import InvalidValueError
from storage.repos.fields import check_name
from workers.engine.profile import load_profile

REDIS_FSYNC = ("always", "everysec")


def option_problems(opts: UpOptions) -> list[str]:
    """What is wrong with the options, one line per flag naming it; empty when they can run."""
    lines: list[str] = []
    if opts.gateways < 1:
        lines.append(f"--gateways: must be at least 1, got {opts.gateways}")
    if opts.redis_fsync not in REDIS_FSYNC:
        lines.append(f"--redis-fsync: expected always or everysec, got {opts.redis_fsync!r}")
    try:
        policy_class(opts.policy)
    except UnknownPolicyError as exc:
        lines.append(f"--policy: {exc}")
    for name in opts.tenants:
        try:
            check_name(name, "tenant")
        except InvalidValueError as exc:
            lines.append(f"--tenant: {exc}")
    doubled = sorted({n for n in opts.tenants if opts.tenants.count(n) > 1})
    if doubled:
        lines.append(f"--tenant: given more than once: {', '.join(doubled)}")
    if opts.console and opts.port == opts.console_port:
        lines.append(f"--console-port: the gateway already uses port {opts.port}")
    if is_file(opts.state_dir):
        lines.append(f"--state-dir: {opts.state_dir} exists and is not a directory")
    elif (problem := unwritable(opts.state_dir)) is not None:
        lines.append(f"--state-dir: {opts.state_dir}: {problem}")
    if opts.worker_kind not in ("sim", "vllm"):
        lines.append(f"--worker-kind: expected sim or vllm, got {opts.worker_kind!r}")
    elif opts.worker_kind == "vllm" and not opts.vllm_model:
        lines.append("--vllm-model: needed with --worker-kind vllm (a directory or name)")
    elif opts.worker_kind == "sim":
        try:
            load_profile(opts.profile)
        except ValueError as exc:
            lines.append(f"--profile: {exc}")
    return lines
