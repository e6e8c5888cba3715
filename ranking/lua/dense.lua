-- dense.lua: dense rank of a decoded value in one sorted set: 1 + the number
-- of distinct values strictly better. Used by store_query.go.
--
-- Value v occupies the scores [v * 2^tieBits, (v+1) * 2^tieBits). The walk
-- starts at the best score and jumps to the next distinct value with one
-- ZREVRANGEBYSCORE (ZRANGEBYSCORE for asc) ... LIMIT 0 1 per step, O(log n)
-- each, so it costs O(d log n) for d distinct better values, capped at cap
-- steps.
--
-- KEYS[1]  the sorted set
-- ARGV     value, tieBits, asc (0/1), cap
-- Returns  {rank, approx}: approx = 1 when the walk hit the cap; rank is
--          then cap + 1, a lower bound.
local call = redis.call
local floor = math.floor
local function num(x) return string.format('%.17g', x) end

local key = KEYS[1]
local v, tb, asc, cap = tonumber(ARGV[1]), 2 ^ tonumber(ARGV[2]), ARGV[3] == '1', tonumber(ARGV[4])

local r
if asc then r = call('ZRANGE', key, 0, 0, 'WITHSCORES')
else r = call('ZREVRANGE', key, 0, 0, 'WITHSCORES') end
local n = 0
while r[2] do
  local cv = floor(tonumber(r[2]) / tb)
  if (asc and cv >= v) or (not asc and cv <= v) then break end
  if n >= cap then return {n + 1, 1} end
  n = n + 1
  if asc then
    r = call('ZRANGEBYSCORE', key, num((cv + 1) * tb), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  else
    r = call('ZREVRANGEBYSCORE', key, '(' .. num(cv * tb), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  end
end
return {n + 1, 0}
