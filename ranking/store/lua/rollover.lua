-- rollover.lua: one chunk of the prefill of rolling board S(k) from S(k-1):
-- for each member m of S(k-1) not yet in S(k):
--   ZADD NX S(k)[m] = S(k-1)[m] - P(k-N)[m] + P(k)[m]
-- keeping m only if it has an event in the window (value != 0, or present in
-- one of P(k-N+1..k)). Runs under the rollover lock (fencing by token).
--
-- KEYS[1]  meta hash of the board+dims
-- ARGV     lockKey, token, lockTTLms, raise(0/1), done(0/1), kStartMs, kId, cursor,
--          S(k-1), S(k), P(k-N), P(k), sTTLms, tieMode, tieBits,
--          wbPrevQ, wbQ, pNewQ, nMid, nMid x P(i) keys, then members
-- Returns  number of members added
local call = redis.call
local floor = math.floor
local fmt = string.format
local A = ARGV
local meta = KEYS[1]
if call('GET', A[1]) ~= A[2] then return redis.error_reply('ROLLOVER lost lock') end
call('PEXPIRE', A[1], A[3])
local kStart = tonumber(A[6])
if A[4] == '1' then
  local head = tonumber(call('HGET', meta, 'head'))
  if head == nil or head < kStart then call('HSET', meta, 'head', fmt('%.17g', kStart)) end
end
local sPrev, sK, pOld, pNew = A[9], A[10], A[11], A[12]
local sttl = tonumber(A[13])
local mode, tb = tonumber(A[14]), 2 ^ tonumber(A[15])
local wbPrev, wb, pNewQ = tonumber(A[16]), tonumber(A[17]), tonumber(A[18])
local nMid = tonumber(A[19])
local mids = {}
for i = 1, nMid do mids[i] = A[19 + i] end

local function dec(score)
  if mode == 0 then return score, 0 end
  local v = floor(score / tb)
  local part = score - v * tb
  if mode == 1 then return v, part end
  return v, tb - 1 - part
end
local function enc(v, q)
  if mode == 0 then return v end
  if mode == 1 then return v * tb + q end
  return v * tb + (tb - 1 - q)
end

local added = 0
for i = 20 + nMid, #A do
  local m = A[i]
  if not call('ZSCORE', sK, m) then
    local cur = call('ZSCORE', sPrev, m)
    if cur then
      local v, q = dec(tonumber(cur))
      q = q + wbPrev
      local o = call('ZSCORE', pOld, m)
      if o then v = v - dec(tonumber(o)) end
      local keep = v ~= 0
      local n = call('ZSCORE', pNew, m)
      if n then
        local nv, nq = dec(tonumber(n))
        v = v + nv
        if nq + pNewQ > q then q = nq + pNewQ end
        keep = true
      end
      if not keep then
        for j = 1, nMid do
          if call('ZSCORE', mids[j], m) then keep = true; break end
        end
      end
      if keep then
        if q < wb then q = wb end
        call('ZADD', sK, 'NX', fmt('%.17g', enc(v, q - wb)), m)
        added = added + 1
      end
    end
  end
end
if sttl > 0 and call('EXISTS', sK) == 1 then call('PEXPIRE', sK, sttl) end
if A[5] == '1' then
  local rolled = tonumber(call('HGET', meta, 'rolled'))
  if rolled == nil or rolled < kStart then call('HSET', meta, 'rolled', fmt('%.17g', kStart)) end
  call('HDEL', meta, 'roll_k', 'roll_cursor')
else
  call('HSET', meta, 'roll_k', A[7], 'roll_cursor', A[8])
end
return added
