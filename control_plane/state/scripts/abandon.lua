-- abandon: a gateway's submit call failed without an answer (a read timeout, a connection lost
-- after the call was sent, a cancelled caller). Redis may have run it, may still run it (the
-- call waiting in its buffers), or never will; this makes the outcome definite.
-- An id Redis does not know gets a tombstone — a `withdrawn` hash with seq 0 and reason
-- `submit_failed` — so a submit that runs after it is a duplicate and changes nothing. A known id
-- is left as it is and reported: the caller withdraws a queued request and releases a slot it
-- took from the fast lane (a take sends no grant message, so nothing else would end it; a
-- request the leader granted reaches the gateway's grant reader, which releases it as an
-- orphan).
-- Idempotent: a repeated call finds the tombstone and reports "other".
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- ARGV[1]  request id
-- ARGV[2]  now (epoch seconds)
-- ARGV[3]  gateway id (the caller)
-- ARGV[4]  retention of the tombstone in seconds (EXPIRE)
-- Returns  {outcome, worker, worker_url}: outcome "absent" (the tombstone is written) | "queued" |
--          "taken" (granted to this gateway by the fast lane, first attempt; worker set) |
--          "other" (granted by the leader, ended, or another gateway's).

local st = redis.call('HMGET', KEYS[1], 'seq', 'status', 'gateway', 'lent_by', 'attempts',
  'worker', 'worker_url')
if not st[1] then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'status', 'withdrawn', 'reason', 'submit_failed',
    'gateway', ARGV[3], 'seq', 0, 'attempts', 0, 'finished_at', ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return {'absent', '', ''}
end
if st[3] ~= ARGV[3] then
  return {'other', '', ''}
end
if st[2] == 'queued' then
  return {'queued', '', ''}
end
if st[2] == 'granted' and st[4] and st[5] == '1' then
  return {'taken', st[6], st[7] or ''}
end
return {'other', '', ''}
