-- withdraw: take a still-queued request out of the queue (client left, or queue timeout).
-- Only a "queued" request is withdrawn: if the scheduler granted it first, this returns 0 and
-- the gateway must treat the request as running (abort or finish it).
-- Idempotent: withdrawing an already withdrawn request returns 1 and changes nothing.
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  queued ZSET             arb:{c}:queued
-- KEYS[3]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[4]  events stream           arb:{c}:events
-- KEYS[5]  per-model queued hash   arb:{c}:model_queued
-- ARGV[1]  request id
-- ARGV[2]  now (epoch seconds, a JSON number)
-- ARGV[3]  reason (free text, e.g. "client_disconnected", "queue_timeout")
-- ARGV[4]  retention of the request hash in seconds (EXPIRE)
-- ARGV[5]  events stream approximate MAXLEN
-- ARGV[6]  retention once recorded (the recorder wrote its row first, see recorded.lua)
-- Returns  1 when the request is withdrawn, 0 when it was not queued.
-- ARGV[7]  the envelope as the caller submitted it (JSON its own codec wrote), or ""
-- Emits    events entry data = {"type":"withdrawn","id","tenant","reason","seq","at","attempts",
--          "envelope"}: with ARGV[7] the recorder writes the request's row from the event
--          alone, however late it reads it. The caller's text, not the hash's: a hash edited by
--          hand may hold what Lua's JSON reads and the events' readers refuse, and one entry
--          they cannot read would keep the leader from dropping the job.

local st = redis.call('HMGET', KEYS[1], 'status', 'tenant', 'seq', 'recorded', 'model',
  'attempts')
if st[1] == 'withdrawn' then
  return 1
end
if st[1] ~= 'queued' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'withdrawn', 'reason', ARGV[3], 'finished_at', ARGV[2])
redis.call('EXPIRE', KEYS[1], st[4] and ARGV[6] or ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
if st[2] and redis.call('HINCRBY', KEYS[3], st[2], -1) <= 0 then
  redis.call('HDEL', KEYS[3], st[2])
end
if st[5] and redis.call('HINCRBY', KEYS[5], st[5], -1) <= 0 then
  redis.call('HDEL', KEYS[5], st[5])
end
-- only plain counts are copied from the hash: a hand edit must not make the entry unreadable
local function count(value)
  if value and #value <= 15 and string.match(value, '^[1-9]%d*$') then
    return value
  end
end
local data = '{"type":"withdrawn","id":' .. cjson.encode(ARGV[1]) ..
  ',"reason":' .. cjson.encode(ARGV[3]) .. ',"at":' .. ARGV[2]
if st[2] then
  data = data .. ',"tenant":' .. cjson.encode(st[2])
end
for name, value in pairs({seq = count(st[3]), attempts = count(st[6])}) do
  data = data .. ',"' .. name .. '":' .. value
end
if ARGV[7] ~= '' then
  data = data .. ',"envelope":' .. ARGV[7]
end
data = data .. '}'
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'data', data)
return 1
