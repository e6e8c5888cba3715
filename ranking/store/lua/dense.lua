-- dense.lua: dense ranks of decoded values in one sorted set: 1 + the number
-- of distinct values strictly better. Used by store_rank.go.
--
-- Value v occupies the scores [v * 2^tieBits, (v+1) * 2^tieBits). One walk
-- serves every target value: it starts at the best score and jumps to the
-- next distinct value with one ZREVRANGEBYSCORE (ZRANGEBYSCORE for asc) ...
-- LIMIT 0 1 per step, O(log n) each, and hands out the ranks of the targets
-- as it passes them. It costs O(d log n) for the d distinct values better
-- than the worst target, and stops after cap steps: the script runs at most
-- cap + 1 Redis commands.
--
-- KEYS[1]  the sorted set
-- ARGV     tieBits, asc (0/1), cap, then the target values, distinct, best
--          first
-- Returns  {steps, capped, rank of each target}: capped = 1 when the walk
--          stopped at cap before reaching the last target; the targets it
--          did not reach get steps + 1, a lower bound.
local call = redis.call
local floor = math.floor
local function num(x) return string.format('%.17g', x) end

local key = KEYS[1]
local tb, asc, cap = 2 ^ tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3])

local out = {0, 0}
local ti = 4
local r
if ti <= #ARGV then
  if asc then r = call('ZRANGE', key, 0, 0, 'WITHSCORES')
  else r = call('ZREVRANGE', key, 0, 0, 'WITHSCORES') end
end
local n = 0
while ti <= #ARGV and r[2] do
  local v = tonumber(ARGV[ti])
  local cv = floor(tonumber(r[2]) / tb)
  if (asc and cv >= v) or (not asc and cv <= v) then
    -- every value passed so far is strictly better than v
    out[#out + 1] = n + 1
    ti = ti + 1
  elseif n >= cap then
    out[2] = 1
    break
  else
    n = n + 1
    if asc then
      r = call('ZRANGEBYSCORE', key, num((cv + 1) * tb), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    else
      r = call('ZREVRANGEBYSCORE', key, '(' .. num(cv * tb), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    end
  end
end
-- past the last value (exact), or stopped at the cap (lower bounds)
for _ = ti, #ARGV do out[#out + 1] = n + 1 end
out[1] = n
return out
