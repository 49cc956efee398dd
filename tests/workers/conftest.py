"""Fixtures shared by the worker tests: one OpenAI-compatible worker of each kind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.workers.sim.process import running_sim

# Fast enough that a 32-token answer takes a few milliseconds, slow enough that steps still
# interleave with HTTP writes.
COMPAT_SIM_SPEED = "50"


@dataclass(frozen=True)
class CompatWorker:
    """A worker under the compatibility suite: ``root`` URL and served ``model`` name."""

    kind: str
    root: str
    model: str

    @property
    def base_url(self) -> str:
        """The OpenAI client's base URL."""
        return f"{self.root}/v1"


@pytest.fixture(scope="module", params=["sim", pytest.param("vllm", marks=pytest.mark.vllm)])
def compat_worker(request: pytest.FixtureRequest) -> Iterator[CompatWorker]:
    """The simulated worker (a real process, ``tiny-cpu`` profile) or the real vLLM CPU server."""
    if request.param == "sim":
        with running_sim("--profile", "tiny-cpu", "--speed", COMPAT_SIM_SPEED) as sim:
            yield CompatWorker("sim", sim.root, sim.model)
        return
    from tests.support.vllm_server import running_vllm

    with running_vllm() as (root, model):
        yield CompatWorker("vllm", root, model)
