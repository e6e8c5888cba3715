-- apply.lua: dedupe + every update of a set of events that live in ONE slot,
-- atomically. Built by apply.go; the semantics are the package doc of ranking/store.
--
-- KEYS[1]  any key of the call's slot (routing only)
-- ARGV     encoding (see below), prefix, dedupe key prefix, positionArgs, nSpans x spanArgs,
--          nMarks x markArgs (contract.go), dedupeArgs, nBoards, nBoards x
--          boardArgs (contract.go), nGroups, per group (stream): groupArgs,
--            nPeriods, nPeriods x (id, startMs, endMs) (consecutive periods);
--          nEvents, packed (0/1), [packed: nPlain, nPlain x plain events'
--            (shard hash, fingerprint), then the others:] per event:
--            eventArgs (its message ID,
--            nUpdates sent, its ID's shard hash and fingerprint: see below;
--            shard hash "": the caller decided the event is new, see
--            Event.Decided; its verdict template, packed calls only),
--            nUpdates x updateArgs (gp: the update's (stream, period) pair,
--            numbering the periods of the streams' tables in order from 1;
--            LATE_GP: judged late by the caller from the stream time of the
--            event's partition); packed calls then: nFolds x (foldArgs,
--            nm x sumArgs)
-- Returns  {REFUSED_*, ...} when the call was refused (see below), else
--          per event a string of status characters (ST_*), one per update;
--          a duplicate repeats the verdict of the first delivery as
--          ST_REPEAT_LATE or ST_REPEAT_RANGE. A packed call returns one
--          string: the verdicts of the updates it was sent, in order.
--
-- Packed calls (apply.go, call.args): the caller has folded the updates of
-- fast boards (sums without keep_top or base) per (stream, period, member)
-- and judged them (late, tie out of range); only the other updates are
-- sent one by one, and each event's template gives its verdicts with
-- ST_BY_SCRIPT where the script judges. A packed call holds only when no
-- event is a duplicate and no folded member could leave its range; else it
-- gives up before it changes anything (REFUSED_REPLAN: the IDs it added
-- are removed again, the position records are not written yet) and the
-- caller sends it again per update.
--
-- Numbers are passed to redis.call as integer strings (int, prelude.lua).
-- The arguments come in the encoding the first one names (args.go):
-- ARGS_MSGPACK, one msgpack array whose numbers arrive as Lua numbers (no
-- tonumber parsing), or ARGS_PLAIN, the rest of ARGV as strings.
if nx() == ARGS_MSGPACK then A, pos = cmsgpack.unpack(nx()), 1 end
local prefix, dprefix = nx(), nx()

-- Continuity (Store.ApplyFrom): the call names, per partition of its batch,
-- the position record it expects and the one it leaves, and the generation
-- counter it expects. Any difference refuses the whole call before it
-- changes anything: Redis lost writes (or another writer moved on), and the
-- caller must find out where Redis stands. Marks are written last, after
-- the effects they describe.
local P = {poskey = nx(), gkey = nx(), gcheck = nn(), nspan = nn(), lkey = nx(), nmark = nn()}
local SP, MK = {}, {}
for i = 1, P.nspan do
  local sp = {f = nx(), exp = nx(), set = nx()}
  SP[i] = sp
end
for i = 1, P.nmark do
  local mk = {zkey = nx(), off = nn(), v = nx(), lf = nx(), lv = nx()}
  MK[i] = mk
end
if P.gcheck == 1 then
  -- the gens hash's counter only grows; the position hash keeps the last
  -- one seen (a replay resets it: Store.RaisePositions)
  local gc = call('HGET', P.gkey, GENS_NEXT)
  local pc = call('HGET', P.poskey, POS_GENS)
  if pc and (not gc or tonumber(gc) < tonumber(pc)) then
    return {REFUSED_GENS, gc or GENS_NONE, pc}
  end
  if gc and gc ~= pc then call('HSET', P.poskey, POS_GENS, gc) end
end
local poshs -- the spans' new records: written once the call can no longer give up
if P.nspan > 0 then
  local stored, moved = {}, false
  for i, sp in ipairs(SP) do
    stored[i] = call('HGET', P.poskey, sp.f) or ''
    if stored[i] ~= sp.exp then moved = true end
  end
  if moved then
    local out = {REFUSED_POSITION}
    for i = 1, P.nspan do out[i + 1] = stored[i] end
    return out
  end
  poshs = {}
  for _, sp in ipairs(SP) do poshs[#poshs + 1] = sp.f; poshs[#poshs + 1] = sp.set end
end
-- Dedupe (dedupe.go). A message ID is held as a 64-bit fingerprint (fp,
-- an integer, so a set of them is an intset: 8 bytes each) in a set of
-- the bucket of the time it was added (Redis' clock, buckets one TTL
-- wide), chosen by a 31-bit shard hash (sh, sent as 31 binary digits, so
-- that a set's index is a suffix of it) independent of fp. An ID is
-- new when it is in neither the current nor the previous bucket. A
-- bucket's sets form layers: layer j has s0 * DD_GROWTH^(j-1) sets, and an
-- ID is in the set (sh mod size) of one layer. New IDs go to the last
-- layer; a layer is added when the last one holds DD_LAYER_AT IDs per set
-- on average, and a new bucket starts with enough sets for DD_FILL IDs
-- each at the count of the previous one. The meta hash (DD_META) holds per
-- bucket "inc:s0:layers:n:t": its incarnation (key names), first layer
-- size, layers, IDs in the last layer and IDs in all. A bucket older than
-- the previous one is deleted, DD_SWEEP_KEYS keys per call. Verdicts other
-- than applied are kept in the bucket's hash (DD_VERDICTS).
local DD = {ttl = nn(), min = nn(), call = nx()}
local dmeta = dprefix .. DD_META
-- A call with decided events (Event.Decided) must not apply twice: nothing
-- else would tell that its events were applied. Its reply is kept under
-- its ID for a TTL, and the same call run again (a client resending a
-- pipeline) returns it and changes nothing.
local callkey
if DD.call ~= '' then
  callkey = dprefix .. DD_CALLS .. DD.call
  local done = call('GET', callkey)
  if done then
    if poshs then call('HSET', P.poskey, unpack(poshs)) end
    local out = {}
    for v in string.gmatch(done, '[^,]+') do out[#out + 1] = v end
    return out
  end
end
local BK = {} -- the previous bucket (if any), then the current one
do
  local tm = call('TIME')
  DD.now = tonumber(tm[1]) * 1000 + floor(tonumber(tm[2]) / 1000)
  local cur = floor(DD.now / DD.ttl)
  local m = call('HMGET', dmeta, DD_SWEEP, int(cur - 1), int(cur))
  DD.sweep = tonumber(m[1]) or 0
  local function open(id, d)
    local inc, s0, l, n, t = string.match(d, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
    local bk = {id = id, added = 0, inc = inc, s0 = tonumber(s0), l = tonumber(l), n = tonumber(n), t = tonumber(t)}
    bk.kb = dprefix .. id .. '.' .. inc .. '.'
    bk.vk = bk.kb .. DD_VERDICTS
    -- layer j: size[j] sets, indexed by the last bits[j] binary digits of sh
    bk.size, bk.bits, bk.lk = {bk.s0}, {0}, {}
    while 2 ^ bk.bits[1] < bk.s0 do bk.bits[1] = bk.bits[1] + 1 end
    for j = 2, bk.l do
      bk.size[j], bk.bits[j] = bk.size[j - 1] * DD_GROWTH, bk.bits[j - 1] + DD_GROWTH_BITS
    end
    for j = 1, bk.l do bk.lk[j] = bk.kb .. j .. ':' end
    return bk
  end
  local prev
  if m[2] then prev = open(int(cur - 1), m[2]); BK[1] = prev end
  local d = m[3]
  if not d then
    -- a new bucket, sized from the previous one's count
    local s0 = DD.min
    while prev and s0 * DD_FILL < prev.t do s0 = s0 * 2 end
    d = int(call('HINCRBY', dmeta, DD_INC, 1)) .. ':' .. int(s0) .. ':1:0:0'
  end
  DD.cur = open(int(cur), d)
  BK[#BK + 1] = DD.cur
end
-- the sets an ID is looked up in (older layers of the current bucket,
-- then the previous bucket's), flattened: key base, size, bucket
local CK, CS, CB, nck = {}, {}, {}, 0
for _, b in ipairs(BK) do
  for j = 1, b.l do
    if not (b == DD.cur and j == b.l) then
      nck = nck + 1
      CK[nck], CS[nck], CB[nck] = b.lk[j], -b.bits[j], b
    end
  end
end
local AK, AS = DD.cur.lk[DD.cur.l], -DD.cur.bits[DD.cur.l]
local packed -- read with the events
local ADK, ADF, nad = {}, {}, 0 -- packed: the sets and IDs this call added by fresh()
local PL0, npl = 0, 0 -- packed: the plain events' arguments from PL0 on, the first npl added (inline, below)
-- fresh adds fp to the current bucket's last layer unless a set holds it;
-- it returns whether it added it, and the bucket that holds it
local function fresh(sh, fp)
  for i = 1, nck do
    if call('SISMEMBER', CK[i] .. sub(sh, CS[i]), fp) == 1 then return false, CB[i] end
  end
  local b = DD.cur
  local k = AK .. sub(sh, AS)
  if call('SADD', k, fp) == 0 then return false, b end
  b.added = b.added + 1
  if packed then nad = nad + 1; ADK[nad], ADF[nad] = k, fp end
  return true, b
end
-- giveup undoes what a packed call changed (the IDs it added) and returns
-- its refusal
local function giveup()
  for j = 0, npl - 1 do
    local at = PL0 + j * PLAIN_ARGS
    call('SREM', AK .. sub(A[at], AS), A[at + 1])
  end
  for i = 1, nad do call('SREM', ADK[i], ADF[i]) end
  return {REFUSED_REPLAN}
end

local B = {}
for bi = 1, nn() do
  local b = {window = nn(), agg = nn(), mode = nn(), tbits = nn(), unit = nn(), lo = nn(), hi = nn(), keep = nn(),
             asc = nn(), grace = nn(), n = nn(), ret = nn(), metattl = nn(), epoch = nn(), fast = nn() == 1}
  b.tb = 2 ^ b.tbits
  b.minttl = b.grace
  if b.minttl < MIN_TTL_MS then b.minttl = MIN_TTL_MS end
  B[bi] = {__index = b} -- a group's metatable: it reads its board's fields
end
local G, GPG, GPP, ngp = {}, {}, {}, 0 -- gp -> group, period index
-- NONE stands for a group's table that nothing was put in yet (slow-path
-- records, fast-path sums): a call has dozens of streams, most of them
-- using one path, and every table and string a stream allocates costs
-- the interpreter (and its collector) more than a command does. Writes
-- replace it first; a write into it is an error.
local NONE = setmetatable({}, {__newindex = function() error('apply.lua: write to NONE') end})
for gi = 1, nn() do
  -- (the fields set here are in the constructor: no table grows)
  local g = {tag = nx(), board = nn(), periods = {}, recs = NONE, touched = {}, fd = NONE, fabs = NONE, fm = NONE,
             fq = NONE, kb = '', tk = '', gp0 = ngp, olds = false, rolls = false}
  setmetatable(g, B[g.board])
  g.kb = prefix .. ':{' .. g.tag .. '}:'
  -- a key name is built only for the window that uses it
  local total, rolling = g.window == WINDOW_TOTAL, g.window == WINDOW_ROLLING
  if total then g.tk = g.kb .. KIND_TOTAL .. ':' .. PERIOD_ALL end
  for i = 1, nn() do
    ngp = ngp + 1
    GPG[ngp], GPP[ngp] = g, i
    local p = {id = nx(), s = nn(), e = nn(), pk = false, sk = false, q = false}
    p.q = floor(p.s / g.unit)
    if not total then p.pk = g.kb .. KIND_PERIOD .. ':' .. p.id end
    if rolling then p.sk = g.kb .. KIND_ROLLING .. ':' .. p.id end
    g.periods[i] = p
  end
  if rolling then
    -- the stream's head period and latest event time (rollover.go reads
    -- them too); another window's stream keeps no meta: its keys expire
    -- from the latest event time of the call (see the writes)
    local m = call('HMGET', g.kb .. KIND_META, META_ST, META_HEAD)
    g.st, g.head = tonumber(m[1]), tonumber(m[2])
    g.head0 = g.head
  end
  G[gi] = g
end

local function touch(g, key, p)
  if g.touched[key] == nil then g.touched[key] = p end
end

-- rec: the state of one member in one period (slow path). want() creates it
-- while the events are read; load() then reads every wanted member of a
-- period with one command per key (ZMSCORE / HMGET) before any is judged.
-- Ties are absolute (floor(ms/unit)) here and stored relative to tbase.
local function want(g, pi, member, base)
  local recs = g.recs
  if recs == NONE then recs = {}; g.recs = recs end
  local byp = recs[pi]
  if byp == nil then byp = {order = {}}; recs[pi] = byp end
  if base ~= '' then byp.base = true end
  if byp[member] == nil then
    byp[member] = {}
    byp.order[#byp.order + 1] = member
  end
end

local function rec(g, pi, member)
  return g.recs[pi][member]
end

local function load()
  for _, g in ipairs(G) do
    for pi, byp in pairs(g.recs) do
      local p = g.periods[pi]
      local ms = byp.order
      local tbase
      if g.window == WINDOW_TOTAL then tbase = floor(g.epoch / g.unit) else tbase = p.q end
      local zk = (g.window == WINDOW_TOTAL) and g.tk or p.pk
      local curs
      if g.keep > 0 then curs = many('HMGET', zk .. SUFFIX_EXACT, ms) else curs = many('ZMSCORE', zk, ms) end
      local lts, bs
      if g.agg == AGG_LAST then lts = many('HMGET', zk .. SUFFIX_LAST, ms) end
      if byp.base then bs = many('HMGET', zk .. SUFFIX_BASE, ms) end
      for i, member in ipairs(ms) do
        local r = byp[member]
        r.tbase, r.zk = tbase, zk
        local cur = curs[i]
        if cur then
          local v, q = dec(g.mode, g.tb, tonumber(cur))
          r.v, r.q, r.exists = v, q + tbase, true
          if lts ~= nil and lts[i] then
            -- "<event time ms>|<msgid>" of the update that set the value
            local lt = lts[i]
            local sep = string.find(lt, '|', 1, true)
            r.lt, r.lid = tonumber(string.sub(lt, 1, sep - 1)), string.sub(lt, sep + 1)
          end
          if bs ~= nil then r.b = tonumber(bs[i]) or 0 end
        end
        r.v0 = r.exists and r.v or 0
      end
    end
  end
end

-- judge one slow-path update and fold it into the call's state; returns its
-- status. (Fast-path sums are tentatively applied in the event loop: their
-- write may still find that the member would leave the range, and then
-- judges them one by one.)
local function judge(g, pi, member, value, t, base, msgid)
  local p = g.periods[pi]
  -- st: the latest event time applied to the stream, the origin of expiries
  if g.st == nil or t > g.st then g.st = t end
  if g.window == WINDOW_ROLLING and (g.head == nil or p.s > g.head) then g.head = p.s end
  local q = floor(t / g.unit)
  if g.window == WINDOW_TOTAL and g.mode ~= TIE_NONE then
    local off = q - floor(g.epoch / g.unit)
    if off < 0 or off > g.tb - 1 then return ST_OUT_OF_RANGE end
  end
  local r = rec(g, pi, member)
  local agg = g.agg
  if agg == AGG_SUM then
    if g.keep > 0 and value <= 0 then return ST_OUT_OF_RANGE end
    local nv, nb
    if base ~= '' then
      -- base board: the value is the greatest base of the member's events
      -- (0 for events without one) plus their deltas, whatever their order
      local b = tonumber(base)
      if r.exists then
        nv = r.v + value
        if b > r.b then nv = nv + (b - r.b); nb = b end
      else
        nv, nb = b + value, b
      end
    elseif r.exists then nv = r.v + value else nv = value end
    if nv > g.hi or nv < g.lo then return ST_OUT_OF_RANGE end
    r.v = nv
    if nb ~= nil then r.b, r.bdirty = nb, true end
    if not r.exists or q > r.q then r.q = q end
  else
    if value > g.hi or value < g.lo then return ST_OUT_OF_RANGE end
    if not r.exists then
      r.v, r.q = value, q
    elseif agg == AGG_MAX or agg == AGG_MIN then
      local better = (agg == AGG_MAX and value > r.v) or (agg == AGG_MIN and value < r.v)
      if better then r.v, r.q = value, q
      elseif value == r.v and q < r.q then r.q = q end
    elseif t > r.lt or (t == r.lt and msgid > r.lid) then
      -- last: the greatest (exact event time in ms, msgid) wins; the tie
      -- unit only rounds the tie time kept in the score
      r.v, r.q, r.lt, r.lid = value, q, t, msgid
    end
    if not r.exists and agg == AGG_LAST then r.lt, r.lid = t, msgid end
  end
  r.exists = true
  r.dirty = true
  return ST_APPLIED
end

-- events: dedupe, judge the fast-path updates (no reads needed) and note
-- the others; then read the members those need (load) and judge them, in
-- order. Verdicts go to one flat array C: event e's are C[evoff[e] ..
-- evoff[e+1]-1]; bad[e] marks an original event with a verdict other than
-- applied (stored with its dedupe key at the end).
local C, GPOF, evoff, evpos, dupof, bad = {}, {}, {}, {}, {}, {} -- GPOF: the update's gp, by verdict index
local evbk, evfp, evtm = {}, {}, {} -- per event: its dedupe bucket, fingerprint and template (packed)
local nc, orig = 0, nil
local slowq, slowc, slowe, slowg, slowp, nslow = {}, {}, {}, {}, {}, 0
local cnt = {} -- updates applied per gp
local nev = nn()
packed = nn() == 1
if packed then
  -- plain events (all their updates folded and applied by the caller):
  -- their dedupe only
  local nplain = nn()
  if nck == 0 then
    -- fresh, inlined: nothing to look up, only the adds
    -- (giveup finds the IDs added here again from the arguments)
    PL0 = pos
    for i = 1, nplain do
      if call('SADD', AK .. sub(A[pos], AS), A[pos + 1]) == 0 then npl = i - 1; return giveup() end
      pos = pos + PLAIN_ARGS
    end
    npl = nplain
    DD.cur.added = DD.cur.added + nplain
  else
    for _ = 1, nplain do
      local sh, fp = A[pos], A[pos + 1]
      pos = pos + PLAIN_ARGS
      if not fresh(sh, fp) then return giveup() end
    end
  end
  -- the others: their dedupe, then their updates of slow boards; then
  -- the folded sums, into the fast path's tables. From here on events
  -- are the others only.
  nev = nev - nplain
  for e = 1, nev do
    local id, nu, sh, fp, tm = A[pos], A[pos + 1] + 0, A[pos + 2], A[pos + 3], A[pos + 4]
    pos = pos + EVENT_ARGS
    local isnew, bk = fresh(sh, fp)
    if not isnew then return giveup() end
    evpos[e], evoff[e], evbk[e], evfp[e], evtm[e] = pos, nc + 1, bk, fp, tm
    for i = 1, nu do
      local q = pos + (i - 1) * UPDATE_ARGS
      local k = tonumber(A[q + U_GP])
      local g, pi = GPG[k], GPP[k]
      nc = nc + 1
      GPOF[nc] = k
      want(g, pi, A[q + U_MEMBER], A[q + U_BASE])
      nslow = nslow + 1
      slowq[nslow], slowc[nslow], slowe[nslow], slowg[nslow], slowp[nslow] = q, nc, e, g, pi
    end
    pos = pos + UPDATE_ARGS * nu
  end
  for _ = 1, nn() do
    local f = {gp = nn(), cnt = nn(), t = nn(), nm = nn()}
    local g, pi = GPG[f.gp], GPP[f.gp]
    if g.st == nil or f.t > g.st then g.st = f.t end
    if g.window == WINDOW_ROLLING then
      local ps = g.periods[pi].s
      if g.head == nil or ps > g.head then g.head = ps end
    end
    if f.cnt > 0 then cnt[f.gp] = (cnt[f.gp] or 0) + f.cnt end
    if f.nm > 0 then
      local fd, fabs, fm, fq = {}, {}, {}, {}
      if g.fd == NONE then g.fd, g.fabs, g.fm, g.fq = {}, {}, {}, {} end
      g.fd[pi], g.fabs[pi], g.fm[pi], g.fq[pi] = fd, fabs, fm, fq
      local tie = g.mode ~= TIE_NONE
      for j = 1, f.nm do
        local member, d, ab, tq = A[pos], A[pos + 1] + 0, A[pos + 2] + 0, A[pos + 3] + 0
        pos = pos + SUM_ARGS
        fm[j], fd[member], fabs[member] = member, d, ab
        if tie then fq[member] = tq end
      end
    end
  end
end
for e = 1, packed and 0 or nev do
  local id, nu, sh, fp, tm = A[pos], A[pos + 1] + 0, A[pos + 2], A[pos + 3], A[pos + 4]
  pos = pos + EVENT_ARGS
  local isnew, bk = true, nil -- a decided event is new and not held
  if sh ~= '' then isnew, bk = fresh(sh, fp) end
  evpos[e], evoff[e], evbk[e], evfp[e] = pos, nc + 1, bk, fp
  if not isnew then
    -- duplicate: its verdicts are filled in at the end, from the original
    -- (earlier in this call, or stored in the dedupe key by an earlier call).
    -- The originals of this call are indexed by dedupe key from the first
    -- duplicate on.
    if orig == nil then
      orig = {}
      for o = 1, e - 1 do
        if not dupof[o] then orig[A[evpos[o] - EVENT_ARGS]] = o end -- by message ID
      end
    end
    dupof[e] = orig[id] or call('HGET', bk.vk, fp) or ''
    nc = nc + nu
  else
    if orig ~= nil then orig[id] = e end
    for i = 1, nu do
      local q = pos + (i - 1) * UPDATE_ARGS
      local k = tonumber(A[q + U_GP])
      nc = nc + 1
      GPOF[nc] = k
      if k == LATE_GP then
        C[nc] = ST_LATE
        bad[e] = true
      else
        local g, pi = GPG[k], GPP[k]
        if g.fast then
          -- fast path: the update is tentatively applied (see the writes);
          -- a tie board keeps the latest tie time of the member's updates
          local member, value, t = A[q + U_MEMBER], tonumber(A[q + U_VALUE]), tonumber(A[q + U_TIME])
          if g.st == nil or t > g.st then g.st = t end
          if g.window == WINDOW_ROLLING then
            local ps = g.periods[pi].s
            if g.head == nil or ps > g.head then g.head = ps end
          end
          local tq, inrange = nil, true
          if g.mode ~= TIE_NONE then
            tq = floor(t / g.unit)
            if g.window == WINDOW_TOTAL then
              local off = tq - floor(g.epoch / g.unit)
              inrange = off >= 0 and off <= g.tb - 1
            end
          end
          if inrange then
            if g.fd == NONE then g.fd, g.fabs, g.fm, g.fq = {}, {}, {}, {} end
            local fd, fabs = g.fd[pi], g.fabs[pi]
            if fd == nil then fd, fabs = {}, {}; g.fd[pi], g.fabs[pi], g.fm[pi], g.fq[pi] = fd, fabs, {}, {} end
            local d = fd[member]
            if d == nil then
              fd[member], fabs[member] = value, (value < 0 and -value or value)
              local fm = g.fm[pi]; fm[#fm + 1] = member
            else
              fd[member], fabs[member] = d + value, fabs[member] + (value < 0 and -value or value)
            end
            if tq ~= nil then
              local fq = g.fq[pi]
              local cq = fq[member]
              if cq == nil or tq > cq then fq[member] = tq end
            end
            C[nc] = ST_APPLIED
          else
            C[nc] = ST_OUT_OF_RANGE
            bad[e] = true
          end
        else
          want(g, pi, A[q + U_MEMBER], A[q + U_BASE])
          nslow = nslow + 1
          slowq[nslow], slowc[nslow], slowe[nslow], slowg[nslow], slowp[nslow] = q, nc, e, g, pi
        end
      end
    end
  end
  pos = pos + UPDATE_ARGS * nu
end
evoff[nev + 1] = nc + 1
load()
for k = 1, nslow do
  local q, e, g = slowq[k], slowe[k], slowg[k]
  local msgid -- only last boards compare message IDs
  if g.agg == AGG_LAST then msgid = A[evpos[e] - EVENT_ARGS] end
  local c = judge(g, slowp[k], A[q + U_MEMBER], tonumber(A[q + U_VALUE]), tonumber(A[q + U_TIME]),
                  A[q + U_BASE], msgid)
  C[slowc[k]] = c
  if c ~= ST_APPLIED then bad[e] = true end
end

-- rejudge replays, in order, the fast-path updates of one member of one
-- period from old and returns the final value, whether any was applied
-- and the latest tie time (absolute) of those applied; those that would
-- leave the range become out of range.
local function rejudge(g, gi, pi, member, old)
  local cur, applied, aq = old, false, nil
  for e = 1, nev do
    if not dupof[e] then
      local off = evoff[e]
      for i = 1, evoff[e + 1] - off do
        local q = evpos[e] + (i - 1) * UPDATE_ARGS
        local c = off + i - 1
        if C[c] == ST_APPLIED and A[q + U_MEMBER] == member and tonumber(A[q + U_GP]) == g.gp0 + pi then
          local v = tonumber(A[q + U_VALUE])
          if cur + v > g.hi or cur + v < g.lo then C[c] = ST_OUT_OF_RANGE; bad[e] = true
          else
            cur, applied = cur + v, true
            local tq = floor(tonumber(A[q + U_TIME]) / g.unit)
            if aq == nil or tq > aq then aq = tq end
          end
        end
      end
    end
  end
  return cur, applied, aq
end

-- addRoll notes that member's rolling boards S(k), k in [j, min(j+N-1,
-- head)], change by d (P(j) changed by d); rq: the member's absolute tie in
-- P(j) (slow path only). rolls() then writes each S(k) with one read and
-- one write for all its members.
local function addRoll(g, pi, member, d, rq)
  for k = pi, pi + g.n - 1 do
    local pk = g.periods[k]
    if pk == nil or pk.s > g.head then break end
    local rk = g.rolls[k]
    if rk == nil then rk = {order = {}, d = {}, rq = {}}; g.rolls[k] = rk end
    local cd = rk.d[member]
    if cd == nil then
      rk.order[#rk.order + 1] = member
      rk.d[member], rk.rq[member] = d, rq
    else
      rk.d[member] = cd + d
      if rq ~= nil and rq > rk.rq[member] then rk.rq[member] = rq end
    end
  end
end

-- rolls adds the noted changes to the rolling boards; where a member is not
-- yet in S(k) it writes the truth, the sum of P(k-N+1..k) (which already
-- hold this call's updates).
local function rolls(g)
  for k, rk in pairs(g.rolls) do
    local pk = g.periods[k]
    local wb = g.periods[k - g.n + 1].q
    local sk = pk.sk
    local ms = rk.order
    local curs = many('ZMSCORE', sk, ms)
    local out, absent = {}, {}
    for i, member in ipairs(ms) do
      local cur = curs[i]
      if cur then
        local cv, cq = dec(g.mode, g.tb, tonumber(cur))
        local q = cq + wb
        local rq = rk.rq[member]
        if rq ~= nil and rq > q then q = rq end
        out[#out + 1] = int(enc(g.mode, g.tb, cv + rk.d[member], q - wb))
        out[#out + 1] = member
      else
        absent[#absent + 1] = member
      end
    end
    if #absent > 0 then
      local v, q = {}, {}
      for j = 1, #absent do v[j], q[j] = 0, wb end
      for i = k - g.n + 1, k do
        local pis = g.periods[i]
        local ps = many('ZMSCORE', pis.pk, absent)
        for j = 1, #absent do
          if ps[j] then
            local pv, pq = dec(g.mode, g.tb, tonumber(ps[j]))
            v[j] = v[j] + pv
            if pq + pis.q > q[j] then q[j] = pq + pis.q end
          end
        end
      end
      for j, member in ipairs(absent) do
        out[#out + 1] = int(enc(g.mode, g.tb, v[j], q[j] - wb))
        out[#out + 1] = member
      end
    end
    many('ZADD', sk, out)
    touch(g, sk, pk)
  end
end

-- the fast path's old values, read before anything is written: a packed
-- call gives up here if a member's sum could leave its range (readOlds
-- returns false). (A function: the main chunk is out of registers.)
local function readOlds(g)
  g.olds = {}
  local mode, tb, hi, lo = g.mode, g.tb, g.hi, g.lo
  for pi, fm in pairs(g.fm) do
    local olds = many('ZMSCORE', (g.window == WINDOW_TOTAL) and g.tk or g.periods[pi].pk, fm)
    g.olds[pi] = olds -- parsed once, here: the scores as numbers (false: absent)
    local fabs = g.fabs[pi]
    for i = 1, #fm do
      local o = olds[i]
      if o then o = o + 0; olds[i] = o end
      if packed then
        local old, ab = 0, fabs[fm[i]]
        if o then
          if mode == TIE_NONE then old = o else old = dec(mode, tb, o) end
        end
        if not (ab <= HEADROOM and old + ab <= hi and old - ab >= lo) then return false end
      end
    end
  end
  return true
end
for _, g in ipairs(G) do
  if not readOlds(g) then return giveup() end
end
if poshs then call('HSET', P.poskey, unpack(poshs)) end

-- fastWrites writes the fast path of stream g (gi: its index).
local function fastWrites(gi, g)
  -- fast path: one ZMSCORE and one ZADD per key for all its members. The
  -- sum is exact (|old| < 2^52 and the updates' magnitudes sum to at most
  -- 2^52) and every intermediate value stays in range when old + sum|v|
  -- <= hi and old - sum|v| >= lo; otherwise the member's updates are judged
  -- one by one from the exact old value. A tie board's member keeps the
  -- latest tie time of its applied updates (and of its old score).
  local mode, tb, hi, lo = g.mode, g.tb, g.hi, g.lo
  local tie, rolling = mode ~= TIE_NONE, g.window == WINDOW_ROLLING
  for pi, fm in pairs(g.fm) do
    local p = g.periods[pi]
    local fd, fabs, fq = g.fd[pi], g.fabs[pi], g.fq[pi]
    local zk = (g.window == WINDOW_TOTAL) and g.tk or p.pk
    local tbase
    if g.window == WINDOW_TOTAL then tbase = floor(g.epoch / g.unit) else tbase = p.q end
    local olds = g.olds[pi]
    local out, no = {}, 0
    for i = 1, #fm do
      local member = fm[i]
      local d, ab = fd[member], fabs[member]
      local o = olds[i]
      local existed = o ~= false
      local old, oq = 0, nil
      if existed then
        if tie then
          local v, q = dec(mode, tb, o)
          old, oq = v, q + tbase
        else
          old = o
        end
      end
      local nv, nq
      if ab <= HEADROOM and old + ab <= hi and old - ab >= lo then
        nv = old + d
        if tie then nq = fq[member] end
      else
        local cur, applied, aq = rejudge(g, gi, pi, member, old)
        if existed or applied then nv = cur; d = cur - old; nq = aq end
      end
      if nv ~= nil then
        local q
        if tie then
          q = nq
          if oq ~= nil and (q == nil or oq > q) then q = oq end
          out[no + 1] = fmt('%d', enc(mode, tb, nv, q - tbase))
        else
          out[no + 1] = fmt('%d', nv)
        end
        out[no + 2] = member
        no = no + 2
        if rolling then addRoll(g, pi, member, d, q) end
      end
    end
    if no > 0 then
      many('ZADD', zk, out)
      touch(g, zk, p)
    end
  end
end

-- writes
for gi, g in ipairs(G) do
  g.rolls = {}
  fastWrites(gi, g)
  -- slow path: combine (read by load), encode, write
  for pi, byp in pairs(g.recs) do
    local p = g.periods[pi]
    local zs, hs, bs, lts, zk = {}, {}, {}, {}, nil
    for _, member in ipairs(byp.order) do
      local r = byp[member]
      if r.dirty then
        zk = r.zk
        local score = int(enc(g.mode, g.tb, r.v, r.q - r.tbase))
        zs[#zs + 1] = score
        zs[#zs + 1] = member
        if g.keep > 0 then hs[#hs + 1] = member; hs[#hs + 1] = score end
        if r.bdirty then bs[#bs + 1] = member; bs[#bs + 1] = int(r.b) end
        if g.agg == AGG_LAST then
          lts[#lts + 1] = member
          lts[#lts + 1] = int(r.lt) .. '|' .. r.lid
        end
        if g.window == WINDOW_ROLLING then addRoll(g, pi, member, r.v - r.v0, r.q) end
      end
    end
    if zk ~= nil then
      many('ZADD', zk, zs)
      touch(g, zk, p)
      if #hs > 0 then many('HSET', zk .. SUFFIX_EXACT, hs); touch(g, zk .. SUFFIX_EXACT, p) end
      if #bs > 0 then many('HSET', zk .. SUFFIX_BASE, bs); touch(g, zk .. SUFFIX_BASE, p) end
      if #lts > 0 then many('HSET', zk .. SUFFIX_LAST, lts); touch(g, zk .. SUFFIX_LAST, p) end
    end
  end
  rolls(g)
  -- keep_top trims, expiries, meta
  for key, p in pairs(g.touched) do
    local hash = string.sub(key, -#SUFFIX_EXACT) == SUFFIX_EXACT or string.sub(key, -#SUFFIX_BASE) == SUFFIX_BASE
    if g.keep > 0 and not hash then
      local card = call('ZCARD', key)
      if card > g.keep then
        if g.asc == 1 then call('ZREMRANGEBYRANK', key, int(g.keep), -1)
        else call('ZREMRANGEBYRANK', key, 0, int(card - g.keep - 1)) end
      end
    end
    if g.ret > 0 and g.st ~= nil then
      -- a key lives at least the grace (and 1 s) of wall time after its last
      -- write, so that a partition behind the others in event time (a
      -- catch-up, a replay) still finds the periods it may write to. st is
      -- the latest event time of the stream (rolling) or of the call's
      -- updates to it (other windows): never later than the stream's, so
      -- the expiry is never earlier
      local ttl = p.e + g.ret - g.st
      if ttl < g.minttl then ttl = g.minttl end
      call('PEXPIRE', key, int(ttl))
    end
  end
  if g.st ~= nil and g.window == WINDOW_ROLLING then
    local mk = g.kb .. KIND_META
    if g.head ~= nil then
      if g.head0 == nil then
        -- a new stream: every rolling board up to head is complete
        call('HSET', mk, META_ST, int(g.st), META_HEAD, int(g.head), META_ROLLED, int(g.head))
      else
        call('HSET', mk, META_ST, int(g.st), META_HEAD, int(g.head))
      end
    else
      call('HSET', mk, META_ST, int(g.st))
    end
    if g.metattl > 0 then call('PEXPIRE', mk, int(g.metattl)) end
  end
end

-- stream time marks, after the effects they describe, and the latest mark
-- of a partition (lf; "" for a replay's generation, see marks.go) only
-- moving forward (marks.lua's rule)
for _, mk in ipairs(MK) do
  call('ZADD', mk.zkey, int(mk.off), mk.v)
  call('ZREMRANGEBYRANK', mk.zkey, 0, int(-MARKS_KEPT - 1))
  if mk.lf ~= '' then
    local cur = call('HGET', P.lkey, mk.lf)
    local old = -1
    if cur then old = tonumber(string.match(cur, '^(-?%d+)')) or -1 end
    if mk.off > old then call('HSET', P.lkey, mk.lf, mk.lv) end
  end
end

-- verdicts: originals first (stored with their dedupe key when not all
-- applied), then duplicates, which repeat late / out-of-range verdicts so
-- that a redelivered message is dead-lettered again rather than lost
-- (and the updates applied per stream and period: the standings' event
-- counts, one HINCRBY per (stream, period) of the call)
local out = {}
if packed then
  -- the sent updates' verdicts, and each event's whole verdict (its
  -- template filled in) kept with its dedupe key when not all applied
  for c = 1, nc do
    if C[c] == ST_APPLIED then
      local k = GPOF[c]
      cnt[k] = (cnt[k] or 0) + 1
    end
  end
  for e = 1, nev do
    local tm = evtm[e]
    if tm ~= '' then
      local v, j = {}, evoff[e]
      for i = 1, #tm do
        local ch = string.sub(tm, i, i)
        if ch == ST_BY_SCRIPT then ch = C[j]; j = j + 1 end
        v[i] = ch
      end
      v = table.concat(v)
      if string.find(v, '[^' .. ST_APPLIED .. ']') then call('HSET', evbk[e].vk, evfp[e], v) end
    end
  end
  out[1] = table.concat(C, '', 1, nc)
end
for e = 1, packed and 0 or nev do
  if not dupof[e] then
    local off, nu = evoff[e], evoff[e + 1] - evoff[e]
    if nu == 1 then out[e] = C[off] else out[e] = table.concat(C, '', off, off + nu - 1) end
    if bad[e] and evbk[e] then call('HSET', evbk[e].vk, evfp[e], out[e]) end
    for c = off, off + nu - 1 do
      if C[c] == ST_APPLIED then
        local k = GPOF[c]
        cnt[k] = (cnt[k] or 0) + 1
      end
    end
  end
end
for e = 1, packed and 0 or nev do
  local orig = dupof[e]
  if orig then
    if type(orig) == 'number' then orig = out[orig] end
    local codes = {}
    for i = 1, evoff[e + 1] - evoff[e] do
      local c = string.sub(orig, i, i)
      if c == ST_LATE or c == ST_REPEAT_LATE then codes[i] = ST_REPEAT_LATE
      elseif c == ST_OUT_OF_RANGE or c == ST_REPEAT_RANGE then codes[i] = ST_REPEAT_RANGE
      else codes[i] = ST_DUPLICATE end
    end
    out[e] = table.concat(codes)
  end
end
local counted = {}
for k, n in pairs(cnt) do
  local g = GPG[k]
  local f = PERIOD_ALL
  if g.window ~= WINDOW_TOTAL then f = g.periods[GPP[k]].id end
  local ck = g.kb .. KIND_COUNT
  call('HINCRBY', ck, f, int(n))
  if g.metattl > 0 and not counted[ck] then
    counted[ck] = true
    call('PEXPIRE', ck, int(g.metattl))
  end
end

-- dedupe: the current bucket's counts, a new layer when its last one is
-- full, and the sweep of buckets older than the previous one
do
  local b = DD.cur
  local n, l = b.n + b.added, b.l
  if n > DD_LAYER_AT * b.size[l] then l, n = l + 1, 0 end
  call('HSET', dmeta, b.id, b.inc .. ':' .. int(b.s0) .. ':' .. int(l) .. ':' .. int(n) .. ':' .. int(b.t + b.added))
end
if DD.now >= DD.sweep then
  local all, budget, more = call('HGETALL', dmeta), DD_SWEEP_KEYS, false
  local oldest = tonumber(DD.cur.id) - 1
  local dying = {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if string.match(f, '^%-?%d+$') then
      if tonumber(f) < oldest then
        -- every ID of the bucket was added at least the TTL ago
        local inc, s0, l = string.match(v, '^(%d+):(%d+):(%d+):')
        call('HDEL', dmeta, f)
        local x, xv = DD_DYING .. f .. '.' .. inc, s0 .. ':' .. l .. ':1:0'
        call('HSET', dmeta, x, xv)
        dying[#dying + 1] = {x, xv}
      end
    elseif string.sub(f, 1, #DD_DYING) == DD_DYING then
      dying[#dying + 1] = {f, v}
    end
  end
  for _, d in ipairs(dying) do
    if budget <= 0 then more = true; break end
    local kb = dprefix .. string.sub(d[1], #DD_DYING + 1) .. '.'
    local s0, l, j, k = string.match(d[2], '^(%d+):(%d+):(%d+):(%d+)$')
    s0, l, j, k = tonumber(s0), tonumber(l), tonumber(j), tonumber(k)
    while budget > 0 and j <= l do
      local size, bits = s0 * DD_GROWTH ^ (j - 1), 0
      while 2 ^ bits < size do bits = bits + 1 end
      local keys = {}
      while k < size and #keys < budget do
        -- set k's name: k in bits binary digits
        local d, x = {}, k
        for i = bits, 1, -1 do
          local r = x % 2
          d[i] = string.char(48 + r) -- the digit
          x = (x - r) / 2
        end
        keys[#keys + 1] = kb .. j .. ':' .. table.concat(d)
        k = k + 1
      end
      if #keys > 0 then call('UNLINK', unpack(keys)) end
      budget = budget - #keys
      if k >= size then j, k = j + 1, 0 end
    end
    if j > l then
      call('UNLINK', kb .. DD_VERDICTS)
      call('HDEL', dmeta, d[1])
    else
      call('HSET', dmeta, d[1], int(s0) .. ':' .. int(l) .. ':' .. int(j) .. ':' .. int(k))
      more = true
    end
  end
  local nxt = DD.now + math.min(DD_SWEEP_MS, DD.ttl)
  if more then nxt = DD.now end
  call('HSET', dmeta, DD_SWEEP, int(nxt))
end
if callkey then call('SET', callkey, table.concat(out, ','), 'PX', int(DD.ttl)) end
return out
