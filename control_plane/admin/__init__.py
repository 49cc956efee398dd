"""Administration services shared by the admin API's routes and the `arbiter admin` CLI.

Owns: audited tenancy operations (tenants, applications, agents, keys), historical fairness
reports and their CSV/HTML rendering, records as JSON. Pure over a `storage.Database`: no HTTP,
no Redis, so both front ends run the very same operations and print the same numbers.
May import: `core`, `settings`, `gateway` (its bounds) and `storage`.
"""
