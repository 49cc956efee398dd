-- worker_set_status: change a registered worker's status without re-creating a removed one.
--
-- KEYS[1]  worker hash             arb:{c}:worker:<id>    (field -> JSON value)
-- ARGV[1]  status as JSON          e.g. "\"draining\""
-- Returns  1 when set, 0 when the worker is not registered.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
return 1
