-- finish: record the final status of one or more requests (a gateway's finished flights, one
-- round trip), free their in-flight entries, keep each hash a while: ARGV[2] seconds, or only
-- ARGV[3] when the recorder already wrote its row (`recorded`). A request still queued is
-- also taken out of the queue (so counts never leak). Per item, idempotent: finishing again
-- with the same status returns 1 and changes nothing.
--
-- Sent in one MULTI/EXEC after the XADDs of the requests' completion events (`Completions`),
-- it must not mark anything when those XADDs failed: an XADD refused at queue time aborts the
-- whole transaction, but one that fails when run (the events key holding another type) does
-- not, so with ARGV[4] = 1 the script first checks that the events key is a stream.
--
-- KEYS[1]  queued ZSET             arb:{c}:queued
-- KEYS[2]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[3]  in-flight hash          arb:{c}:inflight
-- KEYS[4]  per-model queued hash   arb:{c}:model_queued
-- KEYS[5]  events stream           arb:{c}:events
-- KEYS[6…] one request hash per item, in item order (arb:{c}:req:<id>)
-- ARGV[1]  now (epoch seconds)
-- ARGV[2]  retention of a request hash in seconds (EXPIRE)
-- ARGV[3]  retention once recorded (see recorded.lua)
-- ARGV[4]  1: mark only if KEYS[5] is a stream (the events went in before), else 0
-- ARGV[5…] per item, two values: request id, final status (ok | error | aborted | timeout)
-- Returns  a list with, per item, 1 when the request now has this final status, 0 when it
--          is unknown or had already ended with another status (e.g. withdrawn); an error
--          (EVENTSMISSING) and no mark when ARGV[4] is 1 and KEYS[5] is not a stream.

local function finish(key, id, status)
  local st = redis.call('HMGET', key, 'status', 'tenant', 'recorded', 'model')
  if not st[1] then
    return 0
  end
  redis.call('HDEL', KEYS[3], id)
  if st[1] == status then
    return 1
  end
  if st[1] == 'queued' then
    redis.call('ZREM', KEYS[1], id)
    if redis.call('HINCRBY', KEYS[2], st[2], -1) <= 0 then
      redis.call('HDEL', KEYS[2], st[2])
    end
    if st[4] and redis.call('HINCRBY', KEYS[4], st[4], -1) <= 0 then
      redis.call('HDEL', KEYS[4], st[4])
    end
  elseif st[1] ~= 'granted' then
    return 0
  end
  redis.call('HSET', key, 'status', status, 'finished_at', ARGV[1])
  redis.call('EXPIRE', key, st[3] and ARGV[3] or ARGV[2])
  return 1
end

if ARGV[4] == '1' and redis.call('TYPE', KEYS[5]).ok ~= 'stream' then
  return redis.error_reply('EVENTSMISSING the completion events are not in the stream')
end
local out = {}
for i = 1, #KEYS - 5 do
  local base = 4 + (i - 1) * 2
  out[i] = finish(KEYS[5 + i], ARGV[base + 1], ARGV[base + 2])
end
return out
