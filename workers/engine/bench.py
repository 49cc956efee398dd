"""Benchmark: how fast the engine model simulates, in requests per wall second and CPU minute.

Engine only (no HTTP, no policy): a Poisson stream of requests at ``load`` times the engine's
estimated capacity is replayed in virtual time. Prompt lengths are log-normal (mean 512 tokens,
sigma 0.8), output lengths come from the profile's ``output_len``; both are clipped to the
model's context. Workload generation is not timed.

    .venv/bin/python -m workers.engine.bench --requests 100000 --profile llama3-8b-a100 \
        --out out/engine_bench.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from workers.engine.engine import Engine, EngineConfig, EngineRequest
from workers.engine.profile import LatencyModel, LatencyProfile, load_profile
from workers.engine.replay import replay

PROMPT_MEAN, PROMPT_SIGMA = 512.0, 0.8


def capacity_rps(p: LatencyProfile) -> float:
    """Rough requests/s the engine sustains with the bench's mean request shape."""
    latency = LatencyModel(p)
    n_in = min(PROMPT_MEAN, p.model.max_model_len / 2)
    n_out = p.output_len.mean
    batch = max(1, min(p.max_num_seqs, int(p.kv_tokens // (n_in + n_out))))
    decode_s_per_req = n_out / latency.decode_tokens_per_s(batch, int(n_in + n_out / 2))
    prefill_s_per_req = p.prefill_per_token * n_in
    return 1.0 / (decode_s_per_req + prefill_s_per_req)


def workload(
    p: LatencyProfile, n: int, rate: float, seed: int
) -> list[tuple[float, EngineRequest]]:
    """``n`` Poisson arrivals at ``rate``/s with log-normal prompts and profile output lengths."""
    rng = random.Random(seed)
    max_len = p.model.max_model_len
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        n_in = max(1, min(max_len // 2, round(rng.lognormvariate(6.0, PROMPT_SIGMA))))
        n_out = p.output_len.sample(rng, max_len - n_in)
        out.append((t, EngineRequest(f"r{i}", n_in, n_out, arrival=t)))
    return out


def run_bench(
    n_requests: int, profile: str, *, seed: int = 0, load: float = 0.9
) -> dict[str, float | int | str]:
    """Simulate ``n_requests`` through one engine; wall-clock speed and what was simulated."""
    p = load_profile(profile)
    rate = load * capacity_rps(p)
    arrivals = workload(p, n_requests, rate, seed)
    engine = Engine(LatencyModel(p), EngineConfig.from_profile(p), seed=seed)
    steps = decode_seqs = 0
    sim_end = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for step in replay(engine, arrivals):
        steps += 1
        decode_seqs += step.decode_seqs
        sim_end = step.end
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "profile": profile,
        "requests": n_requests,
        "offered_rps": round(rate, 3),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "requests_per_wall_s": round(n_requests / wall, 1),
        "requests_per_cpu_minute": round(60 * n_requests / cpu),
        "tokens_per_wall_s": round(engine.generation_tokens_total / wall, 1),
        "steps_per_wall_s": round(steps / wall, 1),
        "simulated_s": round(sim_end, 3),
        "simulated_per_wall_s": round(sim_end / wall, 2),
        "steps": steps,
        "mean_decode_batch": round(decode_seqs / max(1, steps), 2),
        "generated_tokens": engine.generation_tokens_total,
        "preemptions": engine.num_preemptions,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--profile", default="llama3-8b-a100")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--load", type=float, default=0.9, help="offered load / capacity")
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    args = parser.parse_args(argv)
    result = run_bench(args.requests, args.profile, seed=args.seed, load=args.load)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
