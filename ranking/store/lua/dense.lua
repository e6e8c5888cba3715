-- dense.lua: dense ranks of decoded values in one sorted set: 1 + the number
-- of distinct values strictly better. Used by Store.denseRanks (rank.go).
--
-- Value v occupies the scores [v * 2^tieBits, (v+1) * 2^tieBits). One walk
-- serves every target value: it starts at the best score and jumps to the
-- next distinct value with one ZREVRANGEBYSCORE (ZRANGEBYSCORE for asc) ...
-- LIMIT 0 1 per step, O(log n) each, and hands out the ranks of the targets
-- as it passes them. It costs O(d log n) for the d distinct values better
-- than the worst target, and stops after cap steps: the script runs at most
-- cap + 1 Redis commands.
--
-- KEYS and ARGV: denseArgs (contract.go); the target values follow the
-- head, distinct, best first.
-- Returns  {steps, capped, rank of each target}: capped = 1 when the walk
--          stopped at cap before reaching the last target; the targets it
--          did not reach get steps + 1, a lower bound.
local function num(x) return string.format('%.17g', x) end

local key = KEYS[1]
local D = {tbits = nn(), asc = nn(), cap = nn()}
local tb, asc, cap = 2 ^ D.tbits, D.asc == 1, D.cap

local out = {0, 0}
local ti = pos -- the first target value
local r
if ti <= #A then
  if asc then r = call('ZRANGE', key, 0, 0, 'WITHSCORES')
  else r = call('ZREVRANGE', key, 0, 0, 'WITHSCORES') end
end
local n = 0
while ti <= #A and r[2] do
  local v = tonumber(A[ti])
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
for _ = ti, #A do out[#out + 1] = n + 1 end
out[1] = n
return out
