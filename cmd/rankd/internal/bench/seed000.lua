-- The rolling-board script published with seed article 000 ("方案4"), the
-- baseline of rankd's benchmarks. KEYS: today's day board, today's rolling
-- board, the day board about to expire, tomorrow's rolling board.
-- ARGV: member, delta.
redis.call('ZINCRBY', KEYS[1], ARGV[2], ARGV[1])
local s = redis.call('ZINCRBY', KEYS[2], ARGV[2], ARGV[1])
local r = redis.call('ZSCORE', KEYS[3], ARGV[1]) or 0
local n = tonumber(s) - tonumber(r)
if n < 0 then n = 0 end
redis.call('ZADD', KEYS[4], n, ARGV[1])
return {s, redis.call('ZREVRANK', KEYS[2], ARGV[1])}
