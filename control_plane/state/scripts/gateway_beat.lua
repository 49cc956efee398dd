-- gateway_beat: one gateway replica's heartbeat; registers it and refreshes its liveness key.
-- The liveness key expires (Redis's clock) `ttl` after the latest beat; the registry keeps the id
-- after that, so the scheduler leader can tell "lost" (registered, no liveness key) from "never
-- seen" and release what the lost replica left in Redis.
--
-- KEYS[1]  liveness key            arb:{c}:gateway:<id>:alive
-- KEYS[2]  gateway registry ZSET   arb:{c}:gateways
-- ARGV[1]  gateway id
-- ARGV[2]  liveness time to live in milliseconds (gateway_dead_after_s)
-- ARGV[3]  now (epoch seconds): the registry score, for operators
-- Returns  1 when the replica was alive before this beat, 0 on its first beat or when it had
--          already been considered lost (its requests may have been released meanwhile).

local was_alive = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return was_alive
