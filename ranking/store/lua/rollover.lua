-- rollover.lua: one chunk of the prefill of rolling board S(k) from S(k-1):
-- for each member m of S(k-1) not yet in S(k):
--   ZADD NX S(k)[m] = S(k-1)[m] - P(k-N)[m] + P(k)[m]
-- keeping m only if it has an event in the window (value != 0, or present in
-- one of P(k-N+1..k)). Runs under the rollover lock (fencing by token).
--
-- KEYS[1]  meta hash of the board+dims
-- ARGV     rolloverArgs (contract.go), then the members of the chunk
-- Returns  number of members added
local meta = KEYS[1]
local R = {lock = nx(), token = nx(), lockttl = nx(), raise = nn(), done = nn(), kstart = nn(), kid = nx(),
           cursor = nx(), sprev = nx(), sk = nx(), pold = nx(), pnew = nx(), sttl = nn(), mode = nn(),
           tbits = nn(), wbprev = nn(), wb = nn(), pnewq = nn(), nmid = nn()}
if call('GET', R.lock) ~= R.token then return redis.error_reply('ROLLOVER lost lock') end
call('PEXPIRE', R.lock, R.lockttl)
local fmt = string.format
local kStart = R.kstart
if R.raise == 1 then
  local head = tonumber(call('HGET', meta, 'head'))
  if head == nil or head < kStart then call('HSET', meta, 'head', fmt('%.17g', kStart)) end
end
local sPrev, sK, pOld, pNew = R.sprev, R.sk, R.pold, R.pnew
local sttl, mode, tb = R.sttl, R.mode, 2 ^ R.tbits
local wbPrev, wb, pNewQ = R.wbprev, R.wb, R.pnewq
local mids = {}
for i = 1, R.nmid do mids[i] = nx() end

local added = 0
for i = pos, #A do
  local m = A[i]
  if not call('ZSCORE', sK, m) then
    local cur = call('ZSCORE', sPrev, m)
    if cur then
      local v, q = dec(mode, tb, tonumber(cur))
      q = q + wbPrev
      local o = call('ZSCORE', pOld, m)
      if o then v = v - dec(mode, tb, tonumber(o)) end
      local keep = v ~= 0
      local n = call('ZSCORE', pNew, m)
      if n then
        local nv, nq = dec(mode, tb, tonumber(n))
        v = v + nv
        if nq + pNewQ > q then q = nq + pNewQ end
        keep = true
      end
      if not keep then
        for j = 1, R.nmid do
          if call('ZSCORE', mids[j], m) then keep = true; break end
        end
      end
      if keep then
        if q < wb then q = wb end
        call('ZADD', sK, 'NX', fmt('%.17g', enc(mode, tb, v, q - wb)), m)
        added = added + 1
      end
    end
  end
end
if sttl > 0 and call('EXISTS', sK) == 1 then call('PEXPIRE', sK, sttl) end
if R.done == 1 then
  local rolled = tonumber(call('HGET', meta, 'rolled'))
  if rolled == nil or rolled < kStart then call('HSET', meta, 'rolled', fmt('%.17g', kStart)) end
  call('HDEL', meta, 'roll_k', 'roll_cursor')
else
  call('HSET', meta, 'roll_k', R.kid, 'roll_cursor', R.cursor)
end
return added
