-- rollover.lua: one chunk of the prefill of rolling board S(k) from S(k-1):
-- for each member m of S(k-1) not yet in S(k):
--   ZADD NX S(k)[m] = S(k-1)[m] - P(k-N)[m] + P(k)[m]
-- keeping m only if it has an event in the window (value != 0, or present in
-- one of P(k-N+1..k)). Runs under the rollover lock (fencing by token).
--
-- The chunk is the next R.count members of S(k-1) in its own order
-- (score, then member bytes) after the cursor, taken here with their
-- scores, so that a chunk is one round trip and reads S(k-1) in the same
-- atomic step that writes S(k). The cursor is "<score>:<member>", the last
-- member of the previous chunk as it was read ('' or a value without ':',
-- such as a ZSCAN cursor of an older build: from the start). Why the walk
-- misses no one: the head was raised to k before the first chunk, so
-- every event since then that touched a member of S(k-1) also wrote its
-- S(k) (apply.lua writes the truth where S(k) lacks the member). A member
-- whose S(k-1) score changed during the walk is in S(k) already, and the
-- others keep their places in S(k-1)'s order, so each of them comes after
-- the cursor until a chunk takes it. Members arrive in score order, so
-- S(k)'s inserts land close to each other (a ZSCAN step's are scattered
-- over the whole skiplist).
--
-- KEYS[1]  meta hash of the board+dims
-- ARGV     rolloverArgs (contract.go)
-- Returns  {members given to ZADD NX (it leaves those already in S(k) as
--          they were), the cursor after this chunk ('': S(k) is complete)}
local meta = KEYS[1]
-- before reports a < b in the order of members with equal scores (bytes,
-- as memcmp): Lua's own < on strings follows the locale (strcoll)
local function before(a, b)
  local byte = string.byte
  for i = 1, math.min(#a, #b) do
    local x, y = byte(a, i), byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
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

-- Every step reads or writes all the chunk's members with one command. A
-- member already in S(k) is computed like the others and left alone by
-- ZADD NX: looking it up first cost more than it saved.
local r = 0 -- rank in S(k-1) of the chunk's first member
local c = string.find(R.cursor, ':', 1, true)
if c then
  local ls, lm = sub(R.cursor, 1, c - 1), sub(R.cursor, c + 1)
  if call('ZSCORE', sPrev, lm) == ls then
    r = call('ZRANK', sPrev, lm) + 1
  else
    -- the cursor's member moved (an event touched it): the first member
    -- after lm among those scored ls, by bisection of their ranks
    local lo = call('ZCOUNT', sPrev, '-inf', '(' .. ls)
    local hi = call('ZCOUNT', sPrev, '-inf', ls)
    while lo < hi do
      local mid = floor((lo + hi) / 2)
      if before(lm, call('ZRANGE', sPrev, mid, mid)[1]) then hi = mid else lo = mid + 1 end
    end
    r = lo
  end
end
local kv = call('ZRANGE', sPrev, r, r + R.count - 1, 'WITHSCORES')
local n = #kv / 2
local next = ''
if n == R.count then next = kv[2 * n] .. ':' .. kv[2 * n - 1] end
local ms, v, q = {}, {}, {}
-- the score codec (dec and enc) is inlined in the loops every member
-- goes through; P(k)'s scores, rare here, go through dec
local tie, down = mode ~= TIE_NONE, mode == TIE_DOWN
for i = 1, n do
  ms[i] = kv[2 * i - 1]
  local s = kv[2 * i] + 0
  if tie then
    local a = floor(s / tb)
    local part = s - a * tb
    if down then part = tb - 1 - part end
    v[i], q[i] = a, part + wbPrev
  else
    v[i] = s
  end
end
local olds = many('ZMSCORE', pOld, ms)
-- P(k) has no key before its first event, the usual case for a prefill
-- ahead of the boundary
local news = {}
if call('EXISTS', pNew) == 1 then news = many('ZMSCORE', pNew, ms) end
local keep, undecided, nu = {}, {}, 0
for i = 1, n do
  local o, w = olds[i], news[i]
  local k = true
  if o then
    if tie then v[i] = v[i] - floor(o / tb) else v[i] = v[i] - o end
    k = v[i] ~= 0
  end
  if w then
    if tie then
      local nv, nq = dec(mode, tb, w + 0)
      v[i] = v[i] + nv
      if nq + pNewQ > q[i] then q[i] = nq + pNewQ end
    else
      v[i] = v[i] + w
    end
    k = true
  end
  keep[i] = k
  if not k then nu = nu + 1; undecided[nu] = i end
end
-- a member whose value is 0 stays if it has an event in P(k-N+1..k-1);
-- periods without any event have no key and are skipped
for j = 1, R.nmid do
  if nu == 0 then break end
  if call('EXISTS', mids[j]) == 1 then
    local um = {}
    for x = 1, nu do um[x] = ms[undecided[x]] end
    local in_mid = many('ZMSCORE', mids[j], um)
    local rest, nr = {}, 0
    for x = 1, nu do
      local i = undecided[x]
      if in_mid[x] then keep[i] = true else nr = nr + 1; rest[nr] = i end
    end
    undecided, nu = rest, nr
  end
end
local out, no = {}, 0
for i = 1, n do
  if keep[i] then
    local s = v[i]
    if tie then
      local qi = q[i]
      if qi < wb then qi = wb end
      if down then s = s * tb + (tb - 1 - (qi - wb)) else s = s * tb + (qi - wb) end
    end
    out[no + 1], out[no + 2] = int(s), ms[i]
    no = no + 2
  end
end
many('ZADD', sK, out, 'NX')
if sttl > 0 and call('EXISTS', sK) == 1 then call('PEXPIRE', sK, int(sttl)) end
if next == '' then
  local rolled = tonumber(call('HGET', meta, META_ROLLED))
  if rolled == nil or rolled < kStart then call('HSET', meta, META_ROLLED, int(kStart)) end
  call('HDEL', meta, META_ROLL_K, META_ROLL_CURSOR)
else
  call('HSET', meta, META_ROLL_K, R.kid, META_ROLL_CURSOR, next)
end
return {no / 2, next}
