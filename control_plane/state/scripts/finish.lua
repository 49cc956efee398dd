-- finish: record a request's final status, free its in-flight entry, keep the hash a while:
-- ARGV[4] seconds, or only ARGV[5] when the recorder already wrote its row (`recorded`).
-- A request still queued is also taken out of the queue (so counts never leak).
-- Idempotent: finishing again with the same status returns 1 and changes nothing.
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  queued ZSET             arb:{c}:queued
-- KEYS[3]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[4]  in-flight hash          arb:{c}:inflight
-- KEYS[5]  per-model queued hash   arb:{c}:model_queued
-- ARGV[1]  request id
-- ARGV[2]  now (epoch seconds)
-- ARGV[3]  final status: ok | error | aborted | timeout
-- ARGV[4]  retention of the request hash in seconds (EXPIRE)
-- ARGV[5]  retention once recorded (see recorded.lua)
-- Returns  1 when the request now has this final status, 0 when it is unknown or had
--          already ended with another status (e.g. withdrawn).

local st = redis.call('HMGET', KEYS[1], 'status', 'tenant', 'recorded', 'model')
if not st[1] then
  return 0
end
redis.call('HDEL', KEYS[4], ARGV[1])
if st[1] == ARGV[3] then
  return 1
end
if st[1] == 'queued' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  if redis.call('HINCRBY', KEYS[3], st[2], -1) <= 0 then
    redis.call('HDEL', KEYS[3], st[2])
  end
  if st[4] and redis.call('HINCRBY', KEYS[5], st[4], -1) <= 0 then
    redis.call('HDEL', KEYS[5], st[4])
  end
elseif st[1] ~= 'granted' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'finished_at', ARGV[2])
redis.call('EXPIRE', KEYS[1], st[3] and ARGV[5] or ARGV[4])
return 1
