"""Everything a gateway replica needs, injected (no globals): stores, caches, clients, knobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.heartbeat import Liveness
from control_plane.gateway.identity import NodeInfo, TenantInfo
from control_plane.gateway.knobs import GatewayKnobs
from control_plane.gateway.metrics import GatewayMetrics
from control_plane.gateway.reporter import EventReporter
from control_plane.settings import Settings
from control_plane.state import RequestStore
from workers.engine.diffusion import GenerationRule
from workers.engine.vision import ImageTokenRule


class TenantDirectory(Protocol):
    """Tenants and their hierarchy, as stored in SQL (cached by the implementation)."""

    async def tenant(self, name: str) -> TenantInfo: ...

    async def resolve(self, tenant: TenantInfo, app: str, agent: str) -> NodeInfo: ...


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """A model its workers serve, and the contexts of its active workers (of the others when
    none is active): `max_model_len` the shortest known (what each surely holds: the door
    plans output room with it), `longest_context` the longest, known only when every one is
    (past it none can hold a request: the door refuses); None when unknown."""

    name: str
    max_model_len: int | None
    unit_factor: float
    image_rule: ImageTokenRule | None = None
    """How the model counts an input image (VLMs, from the model registry)."""
    kind: str = "llm"
    """The registry's kind (llm, vlm, image, video, audio); unregistered models are `llm`."""
    generation: GenerationRule | None = None
    """Steps and sizes of an image model (its registered rule, else the default rule)."""
    longest_context: int | None = None

    @property
    def generates_images(self) -> bool:
        return self.kind == "image"


class ModelCatalog(Protocol):
    async def require(self, name: str) -> ModelEntry: ...

    async def served(self) -> list[ModelEntry]: ...


class DoorLimits(Protocol):
    """Per-tenant limits checked at the door, and the usage they are checked against."""

    async def check(self, tenant: TenantInfo, now: float) -> None:
        """Raise the 429 `ApiError` when `tenant` may not submit now."""
        ...

    async def charge(self, tenant: TenantInfo, tokens: int, now: float) -> None:
        """Count `tokens` a finished request of `tenant` consumed."""
        ...

    async def today(self, tenant: TenantInfo, now: float) -> dict[str, int | None]:
        """The tenant's daily token budget and its usage so far today."""
        ...


@dataclass
class GatewayDeps:
    """The wiring of one gateway replica; built by the app factory's lifespan."""

    settings: Settings
    gateway_id: str
    requests: RequestStore
    directory: TenantDirectory
    catalog: ModelCatalog
    limits: DoorLimits
    waiter: GrantWaiter | None
    reporter: EventReporter
    http: aiohttp.ClientSession
    metrics: GatewayMetrics
    knobs: GatewayKnobs = field(default_factory=GatewayKnobs)
    liveness: Liveness = field(default_factory=lambda: Liveness(Settings().gateway_dead_after_s))
