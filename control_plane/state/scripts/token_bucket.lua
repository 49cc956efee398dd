-- token_bucket: one rate-limit decision for a tenant (refill, then take `cost` tokens).
-- The bucket refills at `rate` tokens per second up to `burst`; a clock that steps back never
-- refills. The key expires once a full refill would have happened (a fresh bucket is full).
--
-- KEYS[1]  bucket hash             arb:{c}:rate:<tenant>  (tokens, ts)
-- ARGV[1]  rate (tokens per second, > 0)
-- ARGV[2]  burst (bucket size, >= cost)
-- ARGV[3]  now (epoch seconds)
-- ARGV[4]  cost of this request in tokens
-- Returns  {allowed (1|0), retry_after_s as a string (0 when allowed)}.

local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(bucket[1]) or burst
local ts = bucket[2] or ARGV[3]
if now > tonumber(ts) then
  tokens = math.min(burst, tokens + (now - tonumber(ts)) * rate)
  ts = ARGV[3]
end
local allowed = 0
local retry_after = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry_after = (cost - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', ts)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, string.format('%.17g', retry_after)}
