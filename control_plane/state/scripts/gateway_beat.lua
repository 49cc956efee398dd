-- gateway_beat: one gateway replica's heartbeat; registers it and refreshes its liveness key.
-- The liveness key expires (Redis's clock) `ttl` after the latest beat; the registry keeps the id
-- after that, so the scheduler leader can tell "lost" (registered, no liveness key) from "never
-- seen" and release what the lost replica left in Redis.
-- The registry score never goes down, and a beat that finds the replica lost raises it (as a
-- submit then does, submit.lua): a sweep that read the replica lost forgets it only while its
-- score is the one it read (gateway_forget.lua), whatever the replica's clock did.
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
local score = tonumber(ARGV[3])
local last = redis.call('ZSCORE', KEYS[2], ARGV[1])
if last then
  last = tonumber(last)
  if last > score or (was_alive == 0 and last == score) then
    score = was_alive == 0 and last + 0.001 or last
  end
end
redis.call('ZADD', KEYS[2], score, ARGV[1])
return was_alive
