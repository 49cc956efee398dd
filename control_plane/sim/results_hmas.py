"""The H-MAS sections of `docs/results.md`: fixed policies, vLLM's default and the
meta-controller per phase, with H-MAS's claims judged from the numbers and each `auto` run's
switch timeline."""

from __future__ import annotations

from control_plane.sim.results_format import Results, fmt, table

HMAS_INTRO = {
    "hmas-stress": "Phases of eq. 13: p1 0.6·λ0, p2 1.4·λ0, p3 alternating 1.8·λ0 / 0.2·λ0 "
    "every 10 s (metrics of the requests that arrived in the phase).",
    "hmas-drift": "Composition drift (chat-heavy, then document-heavy), bursts, then a "
    "sustained 1.3·λ0 overload (`scenarios/hmas-drift.yaml`).",
}


AUTO_PREFIX = "auto"
AUTO_LLM = "auto-llm"
TINY_MODEL = "tiny-llama"
"""The served name of the random-weight model `arbiter worker tiny-model` writes."""
VLLM_DEFAULT = "vllm-default"


EXEC_SUFFIX = "+exec"
"""A fixed policy with the controller's execution loop (the controller pinned to it)."""


def _fixed(res: Results) -> list[str]:
    return [
        p
        for p in res
        if not p.startswith(AUTO_PREFIX) and p != VLLM_DEFAULT and not p.endswith(EXEC_SUFFIX)
    ]


def exec_lines(res: Results) -> list[str]:
    """Each `<policy>+exec` run against the same policy without execution control."""
    lines = []
    for p in (q for q in res if q.endswith(EXEC_SUFFIX)):
        base = p.removesuffix(EXEC_SUFFIX)
        gp = res[p]["goodput_rps"]
        if base in res and res[base]["goodput_rps"]:
            ratio = gp / res[base]["goodput_rps"]
            lines.append(f"- {p}: goodput {fmt(gp)} = {ratio:.2f}× {base} without it")
    if lines:
        lines = ["Execution control alone (the controller pinned to one policy):", "", *lines, ""]
    return lines


def hmas_section(name: str, res: Results) -> str:
    parts = [
        f"## H-MAS: {name}, per phase",
        "",
        HMAS_INTRO.get(name, ""),
        "",
        "Fixed policies of the controller's pool; `vllm-default` = fcfs with no admission limit",
        "(every request goes to the engine up to `max_num_seqs`, which queues and preempts on",
        "its own); `auto*` = the meta-controller (docs/algorithms.md §18): `auto` with the rules",
        "selector, the guards and execution control, `auto-bandit` with the contextual bandit,",
        "`auto-noguard` the rules without the emergency bypass and rollback, `auto-noexec` the",
        "rules without execution control (no prefill cap, no dual loop; docs/algorithms.md",
        "§18.3); `<policy>+exec` = the controller pinned to that one policy (pool of one, no",
        "guards), so only execution control acts.",
        "",
        _llm_note(res),
    ]
    header = ["phase", "policy", "goodput (req/s)", "violation rate", "TTFT ok", "TPOT ok",
              "p99 TTFT (s)", "ESG/s", "CV TTFT"]  # fmt: skip
    rows = []
    phases = list(next(iter(res.values()))["per_phase"])
    for phase in phases:
        for policy, r in res.items():
            m = r["per_phase"][phase]
            rows.append(
                [phase, policy, fmt(m["goodput_rps"]), fmt(m["slo_violation_rate"]),
                 fmt(m["ttft_compliance"]), fmt(m["tpot_compliance"]), fmt(m["ttft_p99_s"]),
                 fmt(m["esg_per_s"]), fmt(m.get("ttft_cv"))]
            )  # fmt: skip
    whole_header = ["policy", "goodput (req/s)", "violation rate", "ESG/s", "tokens/s",
                    "ΔGP first→third phase", "R third/second", "switches"]  # fmt: skip
    whole = []
    for p, r in res.items():
        gp = [r["per_phase"][ph]["goodput_rps"] for ph in phases]
        delta = gp[2] - gp[0] if len(gp) >= 3 else None
        ratio = gp[2] / gp[1] if len(gp) >= 3 and gp[1] else None
        whole.append(
            [p, fmt(r["goodput_rps"]), fmt(r["slo_violation_rate"]), fmt(r["esg_per_s"]),
             fmt(r["tokens_per_s"], 4), fmt(delta), fmt(ratio), str(len(r.get("switches", [])))]
        )  # fmt: skip
    parts += ["", table(header, rows), "", "Whole run:", "", table(whole_header, whole), ""]
    parts += exec_lines(res)
    parts += hmas_claims(res, phases)
    parts += _timelines(res)
    return "\n".join(parts)


def _llm_note(res: Results) -> str:
    run = res.get(AUTO_LLM)
    if run is None:
        return (
            "No `auto-llm` row: the `llm` selector needs a model server "
            "(`python -m control_plane.sim.results_doc --llm-url URL`)."
        )
    llm = (run.get("params") or {}).get("llm") or {}
    note = (
        f"`auto-llm` = the guards and execution control with the `llm` selector asking "
        f"`{llm.get('model')}` (replies constrained by `{llm.get('constrain')}`; "
        "docs/algorithms.md §18.2); an invalid reply falls back to the rules."
    )
    if llm.get("model") == TINY_MODEL:
        note += (
            " The only model on this machine is the tiny random-weight one: its constrained "
            "replies are valid but chosen without reading the view (greedy decoding of random "
            "weights gives nearly the same answer to every question), so this row measures "
            "whatever policy it happened to pick, with the guards and execution control — "
            "not an LLM's judgement; its verdicts below say nothing about the `llm` selector."
        )
    return note


def hmas_claims(res: Results, phases: list[str]) -> list[str]:
    """H-MAS's claims for each `auto*` run, judged from the numbers."""
    fixed = _fixed(res)
    if not fixed:
        return []
    best = max(fixed, key=lambda p: res[p]["goodput_rps"])
    top = res[best]["goodput_rps"]
    per_phase = {
        ph: max(fixed, key=lambda p: res[p]["per_phase"][ph]["goodput_rps"]) for ph in phases
    }
    # the best changes when, in some phase, the overall best is more than 5 % behind
    changes = any(
        res[best]["per_phase"][ph]["goodput_rps"] < 0.95 * res[p]["per_phase"][ph]["goodput_rps"]
        for ph, p in per_phase.items()
    )
    lines = [
        f"Best fixed policy: {best} ({fmt(top)} req/s); best per phase: "
        + ", ".join(f"{ph} {p}" for ph, p in per_phase.items())
        + ("" if changes else f" ({best} within 5 % of the best in every phase)"),
        "",
    ]
    base = res.get(VLLM_DEFAULT, {}).get("goodput_rps")
    for p in (q for q in res if q.startswith(AUTO_PREFIX)):
        gp = res[p]["goodput_rps"]
        if base:
            verdict = "holds" if gp >= 1.2 * base else "does not hold"
            lines.append(
                f"- {p}: goodput {fmt(gp)} = {gp / base:.2f}× vllm-default — ≥ 1.2× {verdict}"
            )
        within = gp >= 0.95 * top
        lines.append(
            f"- {p}: {gp / top - 1:+.1%} against {best} — within 5 % of the best fixed "
            + ("holds" if within else "does not hold")
        )
        if changes:
            beats = all(gp > res[q]["goodput_rps"] for q in fixed)
            lines.append(
                f"- {p}: the best fixed policy changes between phases; better than every fixed "
                + ("policy holds" if beats else "policy does not hold")
            )
    return lines


def _timelines(res: Results) -> list[str]:
    out = []
    for p in (q for q in res if q.startswith(AUTO_PREFIX)):
        switches = res[p].get("switches") or []
        steps = "; ".join(f"{s['t']:.0f} s {s['from']}→{s['to']} ({s['reason']})" for s in switches)
        out += ["", f"Switches of {p}: " + (steps or "none") + "."]
    return out
