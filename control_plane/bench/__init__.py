"""Benchmarks and soaks against a running deployment (`arbiter bench …`): load generation,
fault injection, process footprints.
May import: anything below it; it drives processes through HTTP and their CLIs.
"""
