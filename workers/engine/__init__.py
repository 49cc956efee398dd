"""The pure engine model of vLLM's continuous batching and its latency profiles."""

from workers.engine.engine import Engine
from workers.engine.profile import (
    LatencyModel,
    LatencyProfile,
    ModelInfo,
    OutputLenDist,
    list_profiles,
    load_profile,
)
from workers.engine.step import EngineConfig, EngineRequest, RequestState, StepResult, TokenEvent

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineRequest",
    "LatencyModel",
    "LatencyProfile",
    "ModelInfo",
    "OutputLenDist",
    "RequestState",
    "StepResult",
    "TokenEvent",
    "list_profiles",
    "load_profile",
]
