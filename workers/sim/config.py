"""Configuration of one simulated vLLM worker (what ``arbiter worker sim`` flags set)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SimConfig(BaseModel):
    """Everything that shapes a simulated worker; engine fields left ``None`` use the profile's.

    ``speed`` X runs the profile X times faster (every step takes ``1/X`` of its profile time;
    metrics report the wall-clock seconds the clients see). Fault injection:

    - ``fail_rate`` F: each request, decided by a draw seeded with ``seed`` and its arrival index,
      is answered 500 before any token with probability F;
    - ``die_after_tokens`` N: the process exits at once (``os._exit(3)``) right after writing the
      N-th token of streamed answers, counted over all requests (non-streamed answers do not
      count); 0: right after a streamed answer's headers, before its first token (vLLM sends
      its ``200`` before prefill: a crash in prefill);
    - ``stall_after_tokens`` N with ``stall_s`` S: right after the N-th streamed token, no
      stream sends anything for S seconds (once; the engine keeps running meanwhile and the
      tokens it produced arrive together afterwards).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = "tiny-cpu"
    speed: float = Field(default=1.0, gt=0)
    seed: int = 0
    served_model_name: str | None = None
    max_model_len: int | None = Field(default=None, gt=0)
    max_num_seqs: int | None = Field(default=None, gt=0)
    max_num_batched_tokens: int | None = Field(default=None, gt=0)
    kv_tokens: int | None = Field(default=None, gt=0)
    scheduling_policy: Literal["fcfs", "priority"] = "fcfs"
    fail_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    die_after_tokens: int | None = Field(default=None, ge=0)
    stall_after_tokens: int | None = Field(default=None, gt=0)
    stall_s: float = Field(default=0.0, ge=0.0)
