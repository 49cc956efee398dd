"""The model registry and the worker registry."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import CheckConstraint, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.models.json_value import JsonValue
from storage.models.tenancy import NAME_LEN


class ModelSpec(Base):
    """A served model; `hidden_size` and `num_layers` price its tokens in Unified Tokens."""

    __tablename__ = "models"
    __table_args__ = (
        CheckConstraint("kind IN ('llm', 'vlm', 'image', 'video', 'audio')", name="kind"),
        CheckConstraint("hidden_size > 0 AND num_layers > 0", name="shape_positive"),
    )

    name: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="llm")
    hidden_size: Mapped[int] = mapped_column(Integer)
    num_layers: Mapped[int] = mapped_column(Integer)
    unified_cost_factor: Mapped[float | None] = mapped_column(Double)
    max_model_len: Mapped[int | None] = mapped_column(Integer)
    image_tokens: Mapped[Any] = mapped_column(JsonValue, nullable=True)
    """A VLM's image-token rule (`workers/engine/vision.py` `ImageTokenRule` as JSON)."""
    generation: Mapped[Any] = mapped_column(JsonValue, nullable=True)
    """An image model's steps and sizes (`workers/engine/diffusion.py` `GenerationRule`)."""


class Worker(Base):
    """A worker the scheduler may dispatch to; only `active` workers receive new requests."""

    __tablename__ = "workers"
    __table_args__ = (
        CheckConstraint("kind IN ('sim', 'vllm')", name="kind"),
        CheckConstraint("status IN ('active', 'draining', 'drained')", name="status"),
    )

    id: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    url: Mapped[str] = mapped_column(String(512), unique=True)
    kind: Mapped[str] = mapped_column(String(8))
    model: Mapped[str] = mapped_column(String(NAME_LEN))
    profile: Mapped[str | None] = mapped_column(String(NAME_LEN))
    status: Mapped[str] = mapped_column(String(16), default="active")
    max_num_seqs: Mapped[int | None] = mapped_column(Integer)
    registered_at: Mapped[float] = mapped_column(Double, default=time.time)
