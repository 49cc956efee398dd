-- recorded: the recorder committed the rows of these requests; their hashes may go soon.
-- A hash whose request has ended expires within ARGV[1] seconds (never later than it already
-- would). A hash whose request has not ended yet (its `complete` event overtook the gateway's
-- `finish`) is marked `recorded`, and `finish`/`withdraw` then give it this shorter expiry.
-- Idempotent: repeating the call changes nothing more.
--
-- KEYS[1..n]  request hashes       arb:{c}:req:<id>
-- ARGV[1]     seconds a recorded, ended request's hash is kept
-- Returns     how many hashes now expire within ARGV[1] seconds.

local ended = {ok = true, error = true, aborted = true, timeout = true, withdrawn = true}
local ttl = tonumber(ARGV[1])
local n = 0
for _, key in ipairs(KEYS) do
  local status = redis.call('HGET', key, 'status')
  if status and ended[status] then
    local left = redis.call('TTL', key)
    if left < 0 or left > ttl then
      redis.call('EXPIRE', key, ttl)
    end
    n = n + 1
  elseif status then
    redis.call('HSET', key, 'recorded', '1')
  end
end
return n
