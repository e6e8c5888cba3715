-- rollover.lua: one chunk of the prefill of rolling board S(k) from S(k-1):
-- for each member m of S(k-1) not yet in S(k):
--   ZADD NX S(k)[m] = S(k-1)[m] - P(k-N)[m] + P(k)[m]
-- keeping m only if it has an event in the window (value != 0, or present in
-- one of P(k-N+1..k)). Runs under the rollover lock (fencing by token).
-- The chunk is one ZSCAN step of S(k-1) from the cursor, taken here with
-- its scores, so that a chunk is one round trip and reads S(k-1) in the
-- same atomic step that writes S(k). ZSCAN returns every member present
-- for the whole scan at least once; a member returned twice is already in
-- S(k) the second time.
--
-- KEYS[1]  meta hash of the board+dims
-- ARGV     rolloverArgs (contract.go)
-- Returns  {members added, the cursor after this chunk ("0": S(k) is
--          complete)}
local meta = KEYS[1]
local R = {lock = nx(), token = nx(), lockttl = nx(), raise = nn(), count = nn(), kstart = nn(), kid = nx(),
           cursor = nx(), sprev = nx(), sk = nx(), pold = nx(), pnew = nx(), sttl = nn(), mode = nn(),
           tbits = nn(), wbprev = nn(), wb = nn(), pnewq = nn(), nmid = nn()}
if call('GET', R.lock) ~= R.token then return redis.error_reply('ROLLOVER lost lock') end
call('PEXPIRE', R.lock, R.lockttl)
local kStart = R.kstart
if R.raise == 1 then
  local head = tonumber(call('HGET', meta, META_HEAD))
  if head == nil or head < kStart then call('HSET', meta, META_HEAD, int(kStart)) end
end
local sPrev, sK, pOld, pNew = R.sprev, R.sk, R.pold, R.pnew
local sttl, mode, tb = R.sttl, R.mode, 2 ^ R.tbits
local wbPrev, wb, pNewQ = R.wbprev, R.wb, R.pnewq
local mids = {}
for i = 1, R.nmid do mids[i] = nx() end

if R.count == 0 then return {0, R.cursor} end -- raising the head only

-- every step reads or writes all the chunk's candidates with one command
local scan = call('ZSCAN', sPrev, R.cursor, 'COUNT', R.count)
local next, kv = scan[1], scan[2]
local ms = {}
for i = 1, #kv, 2 do ms[#ms + 1] = kv[i] end
local inK = many('ZMSCORE', sK, ms)
local c2, v, q = {}, {}, {}
for i, m in ipairs(ms) do
  if not inK[i] then
    local n = #c2 + 1
    c2[n] = m
    v[n], q[n] = dec(mode, tb, tonumber(kv[2 * i]))
    q[n] = q[n] + wbPrev
  end
end
local olds = many('ZMSCORE', pOld, c2)
local news = many('ZMSCORE', pNew, c2)
local keep, undecided = {}, {}
for i = 1, #c2 do
  if olds[i] then v[i] = v[i] - dec(mode, tb, tonumber(olds[i])) end
  keep[i] = v[i] ~= 0
  if news[i] then
    local nv, nq = dec(mode, tb, tonumber(news[i]))
    v[i] = v[i] + nv
    if nq + pNewQ > q[i] then q[i] = nq + pNewQ end
    keep[i] = true
  end
  if not keep[i] then undecided[#undecided + 1] = i end
end
for j = 1, R.nmid do
  if #undecided == 0 then break end
  local um = {}
  for x, i in ipairs(undecided) do um[x] = c2[i] end
  local in_mid = many('ZMSCORE', mids[j], um)
  local rest = {}
  for x, i in ipairs(undecided) do
    if in_mid[x] then keep[i] = true else rest[#rest + 1] = i end
  end
  undecided = rest
end
local out = {}
for i = 1, #c2 do
  if keep[i] then
    if q[i] < wb then q[i] = wb end
    out[#out + 1] = int(enc(mode, tb, v[i], q[i] - wb))
    out[#out + 1] = c2[i]
  end
end
many('ZADD', sK, out, 'NX')
local added = #out / 2
if sttl > 0 and call('EXISTS', sK) == 1 then call('PEXPIRE', sK, int(sttl)) end
if next == '0' then
  local rolled = tonumber(call('HGET', meta, META_ROLLED))
  if rolled == nil or rolled < kStart then call('HSET', meta, META_ROLLED, int(kStart)) end
  call('HDEL', meta, META_ROLL_K, META_ROLL_CURSOR)
else
  call('HSET', meta, META_ROLL_K, R.kid, META_ROLL_CURSOR, next)
end
return {added, next}
