"""The task types of H-MAS Table 6 and their SLO templates (TTFT ms, TPOT ms per token).

The paper scales both targets of a request by `f(imp) ∈ [1 − α, 1 + α]`, α = 0.2, linear in
the importance `imp ∈ [0.5, 1]` and smaller (stricter) for higher importance.
"""

from __future__ import annotations

from control_plane.core.job import Slo

TABLE_6: dict[str, tuple[float, float]] = {
    "QA": (4000, 70),
    "Dialogue": (4000, 70),
    "Translation": (4500, 80),
    "Extraction": (6000, 80),
    "Paraphrasing": (6000, 90),
    "CodeGeneration": (6000, 90),
    "InstructionFollowing": (6000, 100),
    "Summarization": (7000, 110),
    "LetterDrafting": (8000, 120),
    "MathReasoning": (10000, 130),
    "EssayGeneration": (10000, 130),
    "LongFormGeneration": (12000, 150),
    "ResearchAndCommunication": (13000, 150),
}
TASK_TYPES = tuple(TABLE_6)
ALPHA = 0.2


def importance_factor(importance: float) -> float:
    """`f(imp)`: 1 + α at importance 0.5, 1 − α at 1.0, linear between (clipped)."""
    imp = min(1.0, max(0.5, importance))
    return 1.0 + ALPHA - 2.0 * ALPHA * (imp - 0.5) / 0.5


def task_slo(task: str, importance: float = 0.75) -> Slo | None:
    """Table 6's targets for `task` scaled by importance; None for a type not in the table."""
    base = TABLE_6.get(task)
    if base is None:
        return None
    f = importance_factor(importance)
    return Slo(ttft_s=base[0] * f / 1000.0, tpot_s=base[1] * f / 1000.0)
