-- requeue: put a granted request back in the queue at its ORIGINAL place (its arrival seq),
-- when its worker died before the first token. Allowed while attempts < max attempts.
-- Idempotent: a retried call (same `now`) for a request it already re-queued returns 1, also
-- when the leader has granted it again meanwhile (`requeued_at` survives the grant).
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  queued ZSET             arb:{c}:queued
-- KEYS[3]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[4]  in-flight hash          arb:{c}:inflight
-- KEYS[5]  arrivals stream         arb:{c}:arrivals
-- KEYS[6]  per-model queued hash   arb:{c}:model_queued
-- ARGV[1]  request id
-- ARGV[2]  now (epoch seconds)
-- ARGV[3]  max attempts (2 = the first dispatch plus one retry)
-- ARGV[4]  arrivals stream approximate MAXLEN
-- Returns  1 when re-queued, 0 when not granted or no attempt is left.

local st = redis.call('HMGET', KEYS[1], 'status', 'tenant', 'seq', 'attempts', 'requeued_at',
  'worker', 'model')
if st[5] == ARGV[2] then
  return 1
end
if st[1] ~= 'granted' then
  return 0
end
local attempts = tonumber(st[4])
if attempts >= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'attempts', attempts + 1,
  'requeued_at', ARGV[2], 'prev_worker', st[6])
redis.call('HDEL', KEYS[1], 'worker', 'worker_url', 'granted_at')
redis.call('ZADD', KEYS[2], st[3], ARGV[1])
redis.call('HINCRBY', KEYS[3], st[2], 1)
if st[7] then
  redis.call('HINCRBY', KEYS[6], st[7], 1)
end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[4], '*', 'id', ARGV[1])
return 1
