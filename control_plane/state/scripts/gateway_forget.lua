-- gateway_forget: drop a lost gateway replica from the registry, with its grants stream, once the
-- leader's sweep found nothing of it left in Redis. A replica that beat again meanwhile (it was
-- only stalled) is alive: it is kept.
--
-- KEYS[1]  liveness key            arb:{c}:gateway:<id>:alive
-- KEYS[2]  gateway registry ZSET   arb:{c}:gateways
-- KEYS[3]  its grants stream       arb:{c}:grants:<id>
-- ARGV[1]  gateway id
-- Returns  1 when forgotten, 0 when the replica is alive (or was not registered).

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('DEL', KEYS[3])
return 1
