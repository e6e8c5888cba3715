-- prelude.lua: loaded in front of every script, after the constants that
-- ranking/store/contract.go generates (WINDOW_*, AGG_*, TIE_*, ST_*,
-- LATE_GP, UPDATE_ARGS). The ARGV layouts are the Go types of
-- contract.go; scripts read ARGV in that order with nx (a string) and nn
-- (a number).
local call = redis.call
local floor = math.floor
local fmt, sub = string.format, string.sub
local A = ARGV
local pos = 1
-- nn reads a number: a msgpack argument is one already, and "+ 0"
-- converts an ARGV string as tonumber would, without a function call
local function nx() local v = A[pos]; pos = pos + 1; return v end
local function nn() local v = A[pos] + 0; pos = pos + 1; return v end

-- The score codec (mirrors ranking.Codec): score = value * tb + part, with
-- tb = 2^tieBits and part the tie offset q (TIE_UP) or tb-1-q (TIE_DOWN).
local function enc(mode, tb, v, q)
  if mode == TIE_NONE then return v end
  if mode == TIE_UP then return v * tb + q end
  return v * tb + (tb - 1 - q)
end
local function dec(mode, tb, score)
  if mode == TIE_NONE then return score, 0 end
  local v = floor(score / tb)
  local part = score - v * tb
  if mode == TIE_UP then return v, part end
  return v, tb - 1 - part
end

-- int renders an integer for a command argument. A Lua number passed to
-- redis.call is rendered with %.17g (Redis 7.0), which is exact for the
-- integers used here (below 2^53) but a slow floating-point formatting;
-- %d renders the same digits as an integer.
local function int(x) return fmt('%d', x) end

-- many runs cmd on key with list as its arguments, in slices that Lua can
-- unpack, and returns the replies of the slices concatenated (for replies
-- that are arrays: ZMSCORE, HMGET). A reply's nil is false. opt, if given,
-- goes before the list (ZADD NX).
local MAXV = MAX_UNPACK -- even: lists of (score, member) pairs stay whole
local unpack = unpack
local function many(cmd, key, list, opt)
  local n = #list
  if n <= MAXV then
    if n == 0 then return {} end
    if opt then return call(cmd, key, opt, unpack(list)) end
    return call(cmd, key, unpack(list))
  end
  local out = {}
  for i = 1, n, MAXV do
    local r
    if opt then r = call(cmd, key, opt, unpack(list, i, math.min(i + MAXV - 1, n)))
    else r = call(cmd, key, unpack(list, i, math.min(i + MAXV - 1, n))) end
    if type(r) == 'table' then
      for j = 1, #r do out[i + j - 1] = r[j] end
    end
  end
  return out
end
