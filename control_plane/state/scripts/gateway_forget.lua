-- gateway_forget: drop a lost gateway replica from the registry, with its grants stream, once the
-- leader's sweep found nothing of it left in Redis. A replica that beat again meanwhile (it was
-- only stalled) is alive: it is kept. So is one whose score moved since the sweep read it lost:
-- it beat, or it stored a request after the sweep's read (submit.lua raises the score of a
-- replica without its liveness key), which the sweep has not seen.
--
-- KEYS[1]  liveness key            arb:{c}:gateway:<id>:alive
-- KEYS[2]  gateway registry ZSET   arb:{c}:gateways
-- KEYS[3]  its grants stream       arb:{c}:grants:<id>
-- ARGV[1]  gateway id
-- ARGV[2]  its registry score when the sweep found it lost (before it read its requests)
-- Returns  1 when forgotten, 0 when the replica is alive, its score moved, or it was not
--          registered.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
return 1
