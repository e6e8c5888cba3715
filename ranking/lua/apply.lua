-- apply.lua: dedupe + every update of a set of events that live in ONE slot,
-- atomically. Built by store_apply.go; see ranking/doc.go for the semantics.
--
-- KEYS[1]  any key of the call's slot (routing only)
-- ARGV     prefix, dedupe key prefix, dedupe TTL ms, nGroups,
--          per group (one stream = board+dims):
--            tag, window(0 total,1 periodic,2 rolling), agg(0 sum,1 max,2 min,3 last),
--            tieMode(0 none,1 part=tie,2 part=max-tie), tieBits, tieUnitMs,
--            lo, hi (value range), keepTop, order(0 desc,1 asc), graceMs, N,
--            retentionMs (0 = keep), metaTTLms (0 = keep), tieEpochMs,
--            fast (1: plain sum without tie, keep_top or base: increments, no reads),
--            nPeriods, nPeriods x (id, startMs, endMs)   (consecutive periods)
--          nEvents, per event: msgid, nUpdates,
--            per update: group#, period#, member, value, timeMs, base ("" = none)
-- Returns  one status digit per update: 0 applied, 1 duplicate, 2 late, 3 out of range.
local call = redis.call
local floor = math.floor
local fmt = string.format
local function num(x) return fmt('%.17g', x) end

local A = ARGV
local pos = 1
local function nx() local v = A[pos]; pos = pos + 1; return v end
local function nn() local v = tonumber(A[pos]); pos = pos + 1; return v end

local prefix, dprefix, dttl = nx(), nx(), nn()
local G = {}
for gi = 1, nn() do
  local g = {tag = nx(), window = nn(), agg = nn(), mode = nn(), tbits = nn(), unit = nn(),
             lo = nn(), hi = nn(), keep = nn(), asc = nn(), grace = nn(), n = nn(), ret = nn(),
             metattl = nn(), epoch = nn(), fast = nn(), periods = {}, recs = {}, touched = {}}
  g.tb = 2 ^ g.tbits
  g.fast = g.fast == 1
  g.kb = prefix .. ':{' .. g.tag .. '}:'
  for i = 1, nn() do
    local p = {id = nx(), s = nn(), e = nn()}
    p.pk, p.sk, p.q = g.kb .. 'p:' .. p.id, g.kb .. 'r:' .. p.id, floor(p.s / g.unit)
    g.periods[i] = p
  end
  local m = call('HMGET', g.kb .. 'meta', 'st', 'head', 'rolled')
  g.st = tonumber(m[1]); g.head = tonumber(m[2]); g.rolled = tonumber(m[3])
  g.head0 = g.head
  G[gi] = g
end

-- score codec (mirrors Codec in codec.go)
local function enc(g, v, q) -- q: tie offset in units from the key's base
  if g.mode == 0 then return v end
  if g.mode == 1 then return v * g.tb + q end
  return v * g.tb + (g.tb - 1 - q)
end
local function dec(g, score)
  if g.mode == 0 then return score, 0 end
  local v = floor(score / g.tb)
  local part = score - v * g.tb
  if g.mode == 1 then return v, part end
  return v, g.tb - 1 - part
end

local function touch(g, key, p)
  if g.touched[key] == nil then g.touched[key] = p end
end

-- rec: the state of one member in one period, read once per call.
-- base of ties: absolute tie Q (floor(ms/unit)) is stored relative to tbase.
local function rec(g, pi, member)
  local byp = g.recs[pi]
  if byp == nil then byp = {order = {}}; g.recs[pi] = byp end
  local r = byp[member]
  if r ~= nil then return r end
  local p = g.periods[pi]
  r = {m = member, pi = pi}
  if g.window == 0 then r.tbase = floor(g.epoch / g.unit) else r.tbase = p.q end
  r.zk = (g.window == 0) and (g.kb .. 't:all') or p.pk
  local cur
  if g.keep > 0 then cur = call('HGET', r.zk .. ':h', member) else cur = call('ZSCORE', r.zk, member) end
  if cur then
    local v, q = dec(g, tonumber(cur))
    r.v, r.q, r.exists = v, q + r.tbase, true
    if g.agg == 3 then
      local lt = call('HGET', r.zk .. ':lt', member)
      if lt then
        local sep = string.find(lt, '|', 1, true)
        r.lq, r.lid = tonumber(string.sub(lt, 1, sep - 1)), string.sub(lt, sep + 1)
      end
    end
  end
  r.v0 = r.exists and r.v or 0
  byp[member] = r
  byp.order[#byp.order + 1] = member
  return r
end

-- judge one update; returns a status digit, or nil when the verdict of a
-- fast-path sum waits for the write (codes[ci] is then filled there).
local function judge(g, pi, member, value, t, base, msgid, codes, ci)
  local p = g.periods[pi]
  if g.window ~= 0 and g.st ~= nil and g.st >= p.e + g.grace then return '2' end
  if g.st == nil or t > g.st then g.st = t end
  if g.window == 2 and (g.head == nil or p.s > g.head) then g.head = p.s end
  if g.fast then
    local byp = g.recs[pi]
    if byp == nil then byp = {order = {}}; g.recs[pi] = byp end
    local r = byp[member]
    if r == nil then
      r = {m = member, pi = pi, fast = true, d = 0, abs = 0, pmin = 0, pmax = 0, vals = {}, rc = {}, ri = {}}
      r.zk = (g.window == 0) and (g.kb .. 't:all') or p.pk
      byp[member] = r
      byp.order[#byp.order + 1] = member
    end
    r.d = r.d + value
    if value < 0 then r.abs = r.abs - value else r.abs = r.abs + value end
    if r.d < r.pmin then r.pmin = r.d elseif r.d > r.pmax then r.pmax = r.d end
    local n = #r.vals + 1
    r.vals[n], r.rc[n], r.ri[n] = value, codes, ci
    return nil
  end
  local q = floor(t / g.unit)
  if g.window == 0 and g.mode ~= 0 then
    local off = q - floor(g.epoch / g.unit)
    if off < 0 or off > g.tb - 1 then return '3' end
  end
  local r = rec(g, pi, member)
  local agg = g.agg
  if agg == 0 then
    if g.keep > 0 and value <= 0 then return '3' end
    local nv
    if r.exists then nv = r.v + value elseif base ~= '' then nv = tonumber(base) + value else nv = value end
    if nv > g.hi or nv < g.lo then return '3' end
    r.v = nv
    if not r.exists or q > r.q then r.q = q end
  else
    if value > g.hi or value < g.lo then return '3' end
    if not r.exists then
      r.v, r.q = value, q
    elseif agg == 1 or agg == 2 then
      local better = (agg == 1 and value > r.v) or (agg == 2 and value < r.v)
      if better then r.v, r.q = value, q
      elseif value == r.v and q < r.q then r.q = q end
    elseif q > r.lq or (q == r.lq and msgid > r.lid) then -- last: greatest (q, msgid) wins
      r.v, r.q, r.lq, r.lid = value, q, q, msgid
    end
    if not r.exists and agg == 3 then r.lq, r.lid = q, msgid end
  end
  r.exists = true
  r.dirty = true
  return '0'
end

-- events: dedupe, then judge every update in order
local evcodes, evkeys, incall, dupof = {}, {}, {}, {}
local nev = nn()
for e = 1, nev do
  local msgid = nx()
  local nu = nn()
  local dkey = dprefix .. msgid
  local codes = {}
  if not call('SET', dkey, '0', 'NX', 'PX', dttl) then
    -- duplicate: its verdicts are filled in at the end, from the original
    -- (earlier in this call, or stored in the dedupe key by an earlier call)
    if incall[dkey] then dupof[e] = incall[dkey] else dupof[e] = call('GET', dkey) or '' end
    codes.n = nu
    pos = pos + 6 * nu
  else
    evkeys[e] = dkey
    incall[dkey] = e
    for i = 1, nu do
      local gi, pi, member, value, t, base = nn(), nn(), nx(), nn(), nn(), nx()
      codes[i] = judge(G[gi], pi, member, value, t, base, msgid, codes, i)
    end
  end
  evcodes[e] = codes
end

-- fast path write of P: one ZADD XX INCR (plus a ZADD for a new member).
-- Values are kept within 2^52 (the codec's headroom bit), so old + d is
-- exact whenever the updates' magnitudes sum to at most 2^52; when some
-- intermediate value (old + a prefix sum) leaves [lo, hi] the increment is
-- undone with the exact old value. Larger sums read the
-- old value first. Either way a member whose sum would leave the range has
-- its updates judged one by one, exactly as the slow path does.
local HEADROOM = 4503599627370496 -- 2^52
local function fastP(g, r)
  local old, existed
  if r.abs <= HEADROOM then
    local nv = call('ZADD', r.zk, 'XX', 'INCR', num(r.d), r.m)
    existed = nv ~= false
    if existed then nv = tonumber(nv) else nv = r.d end
    old = nv - r.d
    -- every intermediate value (old + each prefix sum) must be in range
    if old + r.pmax <= g.hi and old + r.pmin >= g.lo then
      if not existed then call('ZADD', r.zk, num(nv), r.m) end
      for i = 1, #r.rc do r.rc[i][r.ri[i]] = '0' end
      return r.d
    end
  else
    local cur = call('ZSCORE', r.zk, r.m)
    existed = cur ~= false
    old = tonumber(cur) or 0
  end
  local cur, applied = old, false
  for i, v in ipairs(r.vals) do
    if cur + v > g.hi or cur + v < g.lo then r.rc[i][r.ri[i]] = '3'
    else cur = cur + v; r.rc[i][r.ri[i]] = '0'; applied = true end
  end
  if existed or applied then
    call('ZADD', r.zk, num(cur), r.m)
    return cur - old
  end
  return nil
end

-- writes
for _, g in ipairs(G) do
  for pi, byp in pairs(g.recs) do
    local p = g.periods[pi]
    for _, member in ipairs(byp.order) do
      local r = byp[member]
      local d
      if r.fast then
        d = fastP(g, r)
        if d ~= nil then touch(g, r.zk, p) end
      elseif r.dirty then
        local score = enc(g, r.v, r.q - r.tbase)
        call('ZADD', r.zk, num(score), member)
        touch(g, r.zk, p)
        if g.keep > 0 then call('HSET', r.zk .. ':h', member, num(score)); touch(g, r.zk .. ':h', p) end
        if g.agg == 3 then call('HSET', r.zk .. ':lt', member, num(r.lq) .. '|' .. r.lid); touch(g, r.zk .. ':lt', p) end
        d = r.v - r.v0
      end
      if d ~= nil and g.window == 2 then
          -- rolling boards S(k), k in [j, min(j+N-1, head)]
          for k = pi, pi + g.n - 1 do
            local pk = g.periods[k]
            if pk == nil or pk.s > g.head then break end
            local wb = g.periods[k - g.n + 1].q
            local sk = pk.sk
            local cur, v, q
            if r.fast then
              cur = call('ZADD', sk, 'XX', 'INCR', num(d), member)
            else
              cur = call('ZSCORE', sk, member)
            end
            if cur and r.fast then
              v = nil
            elseif cur then
              local cv, cq = dec(g, tonumber(cur))
              v, q = cv + d, cq + wb
              if r.q ~= nil and r.q > q then q = r.q end
            else
              v, q = 0, nil
              for i = k - g.n + 1, k do
                local pis = g.periods[i]
                local ps = call('ZSCORE', pis.pk, member)
                if ps then
                  local pv, pq = dec(g, tonumber(ps))
                  pq = pq + pis.q
                  v = v + pv
                  if q == nil or pq > q then q = pq end
                end
              end
              if q == nil then q = wb end
            end
            if v ~= nil then call('ZADD', sk, num(enc(g, v, q - wb)), member) end
            touch(g, sk, pk)
          end
      end
    end
  end
  -- keep_top trims, expiries, meta
  for key, p in pairs(g.touched) do
    if g.keep > 0 and string.sub(key, -2) ~= ':h' then
      local card = call('ZCARD', key)
      if card > g.keep then
        if g.asc == 1 then call('ZREMRANGEBYRANK', key, g.keep, -1)
        else call('ZREMRANGEBYRANK', key, 0, card - g.keep - 1) end
      end
    end
    if g.ret > 0 and g.st ~= nil then
      local ttl = p.e + g.ret - g.st
      if ttl < 1000 then ttl = 1000 end
      call('PEXPIRE', key, num(ttl))
    end
  end
  if g.st ~= nil then
    local mk = g.kb .. 'meta'
    if g.window == 2 and g.head ~= nil then
      if g.head0 == nil then
        call('HSET', mk, 'st', num(g.st), 'head', num(g.head), 'rolled', num(g.head))
      else
        call('HSET', mk, 'st', num(g.st), 'head', num(g.head))
      end
    else
      call('HSET', mk, 'st', num(g.st))
    end
    if g.metattl > 0 then call('PEXPIRE', mk, g.metattl) end
  end
end
-- verdicts: originals first (stored with their dedupe key when not all
-- applied), then duplicates, which repeat late / out-of-range verdicts so
-- that a redelivered message is dead-lettered again rather than lost
for e = 1, nev do
  if not dupof[e] then
    local str = table.concat(evcodes[e])
    if string.find(str, '[23]') then call('SET', evkeys[e], str, 'XX', 'KEEPTTL') end
    evcodes[e] = str
  end
end
for e = 1, nev do
  local orig = dupof[e]
  if orig then
    if type(orig) == 'number' then orig = evcodes[orig] end
    local codes = {}
    for i = 1, evcodes[e].n do
      local c = string.sub(orig, i, i)
      if c == '2' or c == '3' then codes[i] = c else codes[i] = '1' end
    end
    evcodes[e] = table.concat(codes)
  end
end
return evcodes
