"""`arbiter up`: a whole local deployment (Redis, workers, schedulers, recorder, gateway,
console) as supervised child processes, with generated secrets.
May import: `state` and `settings` (it starts the other processes, never imports them).
"""
