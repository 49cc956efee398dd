-- release_lost: end a request whose gateway replica is lost, so its queue place and worker slot
-- are freed and the recorder gets its row. Same transitions as `withdraw` (a queued request
-- becomes "withdrawn": out of the queue, tenant count decremented) and `finish` (a granted one
-- becomes "aborted": out of `inflight`), guarded so that it never touches a request that can
-- still be served: nothing changes when the owner's liveness key exists again, the request
-- belongs to another gateway, or it is no longer queued/granted (served, ended, withdrawn).
-- The `complete` event is appended in the same step: exactly one per released request.
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  queued ZSET             arb:{c}:queued
-- KEYS[3]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[4]  in-flight hash          arb:{c}:inflight
-- KEYS[5]  owner's liveness key    arb:{c}:gateway:<gateway id>:alive
-- KEYS[6]  events stream           arb:{c}:events
-- KEYS[7]  per-model queued hash   arb:{c}:model_queued
-- KEYS[8]  release tombstone       arb:{c}:released:<id>  (outlives the ended hash: a gateway
--          back after it expired tells this end from a Redis that lost the request)
-- ARGV[1]  request id
-- ARGV[2]  gateway id the caller found lost (must be the request's owner)
-- ARGV[3]  now (epoch seconds)
-- ARGV[4]  reason (free text, e.g. "gateway gw-1 lost")
-- ARGV[5]  retention of the request hash in seconds (EXPIRE)
-- ARGV[6]  events stream approximate MAXLEN
-- ARGV[7]  complete event JSON to append when the request was queued (status "withdrawn")
-- ARGV[8]  complete event JSON to append when the request was granted (status "aborted")
-- ARGV[9]  the tombstone's time to live in seconds
-- Returns  "withdrawn" or "aborted" (the status it now has), or "" when nothing changed.

if redis.call('EXISTS', KEYS[5]) == 1 then
  return ''
end
local st = redis.call('HMGET', KEYS[1], 'status', 'tenant', 'gateway', 'model')
if st[3] ~= ARGV[2] then
  return ''
end
local status, event
if st[1] == 'queued' then
  status, event = 'withdrawn', ARGV[7]
  redis.call('ZREM', KEYS[2], ARGV[1])
  if redis.call('HINCRBY', KEYS[3], st[2], -1) <= 0 then
    redis.call('HDEL', KEYS[3], st[2])
  end
  if st[4] and redis.call('HINCRBY', KEYS[7], st[4], -1) <= 0 then
    redis.call('HDEL', KEYS[7], st[4])
  end
elseif st[1] == 'granted' then
  status, event = 'aborted', ARGV[8]
  redis.call('HDEL', KEYS[4], ARGV[1])
else
  return ''
end
redis.call('HSET', KEYS[1], 'status', status, 'reason', ARGV[4], 'finished_at', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[8], status, 'EX', ARGV[9])
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[6], '*', 'data', event)
return status
