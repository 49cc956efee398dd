-- lease_acquire: take the leader lease if it is free, or extend it if `holder` has it
-- (with ARGV[4] = "1", a lease `holder` still has is re-taken as a new tenure: new token).
-- Each new acquisition increments the epoch; the epoch is the fencing token that lets anyone
-- detect writes from a deposed leader (its token is no longer the current epoch).
--
-- A call that timed out at its caller during a Redis stall still runs when Redis resumes,
-- possibly after the caller's next, live call took the lease. So every call carries its
-- process's incarnation and a sequence number, and a new tenure is refused to a call older
-- than the latest acquisition of that same incarnation: a stale call can neither re-take the
-- live tenure (making its token stale) nor take a lease its caller no longer waits for.
--
-- KEYS[1]  lease                   arb:{c}:leader       (string: holder id, PX expiry)
-- KEYS[2]  epoch counter           arb:{c}:leader:epoch
-- KEYS[3]  lease info hash         arb:{c}:leader:info  (holder, token, acquired_at,
--                                                        incarnation, attempt)
-- ARGV[1]  holder id
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  now (epoch seconds, recorded as acquired_at)
-- ARGV[4]  "1" to start a new tenure even if `holder` has the lease (optional)
-- ARGV[5]  the caller's incarnation (optional; "" = no staleness check)
-- ARGV[6]  the call's sequence number within that incarnation (with ARGV[5])
-- Returns  the holder's fencing token (> 0), or 0 when another holder has the lease or the
--          call is older than its incarnation's latest acquisition.

local current = redis.call('GET', KEYS[1])
if current == ARGV[1] and ARGV[4] ~= '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]))
end
if current and current ~= ARGV[1] then
  return 0
end
local incarnation = ARGV[5] or ''
if incarnation ~= '' then
  local last = redis.call('HMGET', KEYS[3], 'holder', 'incarnation', 'attempt')
  if last[1] == ARGV[1] and last[2] == incarnation and tonumber(last[3]) >= tonumber(ARGV[6]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], 'holder', ARGV[1], 'token', token, 'acquired_at', ARGV[3],
  'incarnation', incarnation, 'attempt', ARGV[6] or 0)
return token
