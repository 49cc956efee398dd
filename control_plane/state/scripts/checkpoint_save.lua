-- checkpoint_save: write a JSON checkpoint, optionally fenced by the leader's token so that a
-- deposed leader cannot overwrite its successor's state.
--
-- KEYS[1]  checkpoint              arb:{c}:ckpt:<name>
-- KEYS[2]  leader epoch counter    arb:{c}:leader:epoch
-- ARGV[1]  checkpoint JSON
-- ARGV[2]  fencing token, or "" for an unfenced write
-- Returns  1 when written, 0 when the token is stale (nothing written).

if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
