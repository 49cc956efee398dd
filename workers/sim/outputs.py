"""How long each answer is, how it ends, and its text.

Length rule, for the request with arrival index ``k`` (0, 1, 2, ... in the order the worker
accepted them) on a worker started with seed ``s``:

- exact (``ignore_eos``, or ``min_tokens == max_tokens``): ``max_tokens`` tokens, finish reason
  ``length``;
- ``min_tokens`` set (and below ``max_tokens``): ``L = min_tokens`` — the model emits EOS as soon
  as it is allowed to (a legal model behaviour; it is how a replay makes the worker stop at a
  scenario's true length while sending the client's real ``max_tokens``);
- otherwise ``L = profile.output_len.sample(random.Random(f"{s}:{k}"), max_tokens)`` (a
  log-normal draw, see ``workers.engine.profile.OutputLenDist``);
- the answer ends with EOS (finish ``stop``; the EOS token is counted and its text is empty, as
  in vLLM) when ``L < max_tokens``, else with ``length``.

``max_tokens`` is the request's, lowered to the room left in the context (or that room when the
request gives none). Stop strings then cut the filler text (``workers.sim.tokens``): generation
ends on the token that completes the earliest stop string, the string and everything after it
are dropped from the text (finish ``stop``, ``stop_reason`` = the string); a match completed
before ``min_tokens`` tokens is ignored.
The same seed and the same request order give the same lengths in every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from workers.engine import OutputLenDist
from workers.sim.requests import GenerationRequest
from workers.sim.tokens import FILLER, cut_at_stop, filler_pieces, trim_pieces


@dataclass(slots=True, frozen=True)
class OutputPlan:
    """The decided answer: ``n_out`` tokens, how it finishes, and the text of each token."""

    n_out: int
    finish: str
    stop_reason: str | None
    eos_last: bool
    pieces: tuple[str, ...] | None = None  # explicit texts, only when a stop string cut them

    def text(self, start: int, n: int) -> str:
        """The text of tokens ``start .. start+n-1``."""
        if self.pieces is not None:
            return "".join(self.pieces[start : start + n])
        k = len(FILLER)
        end = start + n
        if self.eos_last and end >= self.n_out:
            end = self.n_out - 1
        return "".join(FILLER[i % k] for i in range(start, end))


def draw_length(dist: OutputLenDist, seed: int, index: int, max_tokens: int) -> int:
    """The drawn length of the request with arrival ``index`` (before ``min_tokens``)."""
    return dist.sample(random.Random(f"{seed}:{index}"), max_tokens)


def plan_output(req: GenerationRequest, dist: OutputLenDist, seed: int, index: int) -> OutputPlan:
    """Apply the module's rule to one validated request."""
    if req.exact:
        n, finish, eos = req.max_tokens, "length", False
    else:
        drawn = req.min_tokens or draw_length(dist, seed, index, req.max_tokens)
        n = min(req.max_tokens, drawn)
        eos = n < req.max_tokens
        finish = "stop" if eos else "length"
    if not req.stop:
        return OutputPlan(n, finish, None, eos)
    pieces = filler_pieces(n)
    if eos:
        pieces[-1] = ""
    lo = max(1, req.min_tokens)
    k, stop = cut_at_stop(pieces, req.stop)
    if stop is None or k < lo:
        return OutputPlan(n, finish, None, eos)
    return OutputPlan(k, "stop", stop, False, tuple(trim_pieces(pieces[:k], stop)))
