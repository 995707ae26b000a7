"""The Lua scripts that keep the shared state on Redis: one script per operation, one key per primitive.

Every script reads the server's clock (``TIME``), so the processes of a fleet never disagree about time
(the breaker's and the limiter's scripts take a clock argument instead when one is given: tests drive them
that way), and runs atomically: no two processes interleave inside one. Each touches exactly one key (a
hash), so the primitives also work on Redis Cluster. Floats cross the wire as ``%.17g`` strings, since Redis
would truncate a Lua number in a reply to an integer. Scripts need Redis >= 5 (or Valkey), where a script
that reads ``TIME`` may write (effects replication). The adaptive limiters' scripts are in ``_limiter_scripts``.
"""

from __future__ import annotations

import hashlib

__all__ = ["BREAKER", "BUCKET", "QUOTA", "Script", "prelude_with_clock"]


class Script:
    """A Lua script and its SHA1, for ``EVALSHA``."""

    __slots__ = ("name", "sha", "source")

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"<Script {self.name} {self.sha[:12]}>"


_PRELUDE = """
local function f(x) return string.format('%.17g', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""


def prelude_with_clock(argument: str) -> str:
    """The start of a script that takes its clock as the Lua expression ``argument`` (an ``ARGV`` entry): that
    time when one is given (a test's clock, in seconds), else the server's ``TIME`` (the empty string: what the
    library sends)."""
    return f"""
local function f(x) return string.format('%.17g', x) end
local now = tonumber({argument})
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""


BUCKET = Script("bucket", _PRELUDE + """
-- A token bucket whose debt is a queue: a call that must wait takes its tokens now (the balance goes
-- negative) and is told how long to sleep, so later calls, from any process, queue behind it.
-- The hash also keeps the fleet's members ('m:' .. id: when each was last seen), so that a process knows
-- the fleet size to take its share of the rate from while Redis cannot be reached.
-- ARGV: rate (> 0), capacity, n, max_wait (-1: no limit), give_back (>= 0),
--       mode (0: peek, 1: take only if there now, 2: take or reserve),
--       member ('': none; else this process's id: mark it present and count the fleet), presence (s)
local rate, cap, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_wait, give, mode = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local member, presence = ARGV[7], tonumber(ARGV[8])
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(h[1]), tonumber(h[2])
if tokens == nil or ts == nil then tokens = cap; ts = now end
if now > ts then tokens = tokens + (now - ts) * rate end
tokens = math.min(cap, tokens + give)
local granted, wait = 0, 0
-- 1e-9 s of refill absorbs float error, so that a waiter woken on time is not sent back to sleep
local slack = rate * 1e-9
if tokens + slack >= n then
  if mode > 0 then tokens = tokens - n; granted = 1 end
else
  wait = (n - tokens) / rate
  if mode == 2 and (max_wait < 0 or wait <= max_wait) then tokens = tokens - n; granted = 1 end
end
redis.call('HSET', KEYS[1], 'tokens', f(tokens), 'ts', f(now))
local fleet = 0
if member ~= '' then
  redis.call('HSET', KEYS[1], 'm:' .. member, f(now))
  -- Members who left are dropped at most every presence / 2 seconds, by whichever process comes first, so
  -- that a fleet's visits cost one scan of its members per period, not one each (a member that left counts
  -- for presence to 1.5 presence seconds); the fields besides the members are tokens, ts and pr.
  local due = tonumber(redis.call('HGET', KEYS[1], 'pr'))
  if due == nil or now >= due then
    local all = redis.call('HGETALL', KEYS[1])
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'm:' and (tonumber(all[i + 1]) or 0) + presence < now then
        redis.call('HDEL', KEYS[1], all[i])
      end
    end
    redis.call('HSET', KEYS[1], 'pr', f(now + presence / 2))
  end
  fleet = redis.call('HLEN', KEYS[1]) - 3
end
-- The key holds nothing a new full bucket would not once it has refilled: let it expire then (members
-- are kept as long as they count).
local keep = math.ceil((cap - tokens) / rate * 1000) + 1000
if fleet > 0 then keep = math.max(keep, math.ceil(presence * 1000)) end
if keep > redis.call('PTTL', KEYS[1]) then redis.call('PEXPIRE', KEYS[1], keep) end
return {granted, f(wait), f(tokens), f(now), fleet}
""")

QUOTA = Script("quota", _PRELUDE + """
-- The retry quota: ARGV: op (0: peek, 1: take, 2: give), n, capacity, refill per second,
--       delta (deferred sync operations: refunds minus debits), ttl_ms
local op, n, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local refill, delta, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(h[1]), tonumber(h[2])
if tokens == nil or ts == nil then tokens = cap; ts = now end
if now > ts and refill > 0 then tokens = math.min(cap, tokens + (now - ts) * refill) end
tokens = math.max(0, math.min(cap, tokens + delta))
local ok = 0
if op == 1 then
  if tokens + 1e-9 >= n then tokens = math.max(0, tokens - n); ok = 1 end
elseif op == 2 then
  tokens = math.min(cap, tokens + n); ok = 1
end
local wait = 0
if tokens + 1e-9 < n then
  if refill > 0 then wait = (n - tokens) / refill else wait = -1 end
end
redis.call('HSET', KEYS[1], 'tokens', f(tokens), 'ts', f(now))
redis.call('PEXPIRE', KEYS[1], ttl)
return {ok, f(tokens), f(wait), f(now)}
""")

BREAKER = Script("breaker", prelude_with_clock("ARGV[17]") + """
-- The circuit breaker's state machine (the same rules as asyncretry.CircuitBreaker, held together by
-- tests/test_redis_breaker_parity.py), on one hash.
-- ARGV: op (0: peek, 1: acquire, 2: success, 3: failure, 4: isolate, 5: reset), probe (0, or the
--       probe's ticket: the number of its half-open period), released probes (of the period released_in),
--       failure_ratio (-1: off), minimum_throughput, sampling_duration,
--       consecutive_failures (-1: off), break_duration, multiplier, max_break, max_probes,
--       successes_to_close, probe_lease, ttl_ms, failures_to_reopen, released_in,
--       now (seconds; '' for the server's TIME)
local op, probe, released = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ratio_limit, min_tp, sampling = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local consecutive_limit, base_break = tonumber(ARGV[7]), tonumber(ARGV[8])
local multiplier, max_break, max_probes = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local to_close, lease, ttl = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local to_reopen, released_in = tonumber(ARGV[15]), tonumber(ARGV[16])
local CLOSED, OPEN, HALF, ISOLATED = 0, 1, 2, 3
local NAMES = {[0] = 'closed', [1] = 'open', [2] = 'half_open', [3] = 'isolated'}
local FIELDS = {'st', 'until', 'opened', 'brk', 'cons', 'infl', 'ps', 'pf', 'per', 'topen', 'rej', 'head', 'lease'}
for i = 0, 9 do table.insert(FIELDS, 's' .. i); table.insert(FIELDS, 'f' .. i) end
local raw = redis.call('HMGET', KEYS[1], unpack(FIELDS))
local v = {}
for i, name in ipairs(FIELDS) do
  v[name] = tonumber(raw[i])
  -- A field another writer corrupted (not a finite number, a state out of range): say so rather than guess.
  local x = v[name]
  if raw[i] and (x == nil or x ~= x or x == math.huge or x == -math.huge) then
    return redis.error_reply('WRONGTYPE the key holds a corrupted circuit breaker: field ' .. name .. ' is ' ..
      tostring(raw[i]) .. ' (delete the key to start the breaker afresh)')
  end
end
if v.st ~= nil and (v.st ~= math.floor(v.st) or v.st < CLOSED or v.st > ISOLATED) then
  return redis.error_reply('WRONGTYPE the key holds a corrupted circuit breaker: field st is ' .. tostring(raw[1]) ..
    ' (a state from 0 to 3; delete the key to start the breaker afresh)')
end
if v.st == nil then
  v = {st = CLOSED, ['until'] = 0, opened = -1, brk = base_break, cons = 0, infl = 0, ps = 0, pf = 0, per = 0,
       topen = 0, rej = 0, head = -1, lease = 0}
end
v.pf = v.pf or 0; v.per = v.per or 0  -- a state written before probes voted and had tickets
local s, fl = {}, {}
for i = 0, 9 do s[i] = v['s' .. i] or 0; fl[i] = v['f' .. i] or 0 end
local events = {}
local function emit(old, reason, brk)
  table.insert(events, NAMES[old] .. '|' .. NAMES[v.st] .. '|' .. reason .. '|' .. brk)
end
local width = sampling / 10
local function clear() for i = 0, 9 do s[i] = 0; fl[i] = 0 end; v.head = -1 end
local function advance()
  local index = math.floor(now / width)
  if v.head < 0 or index < v.head or index - v.head >= 10 then
    clear(); v.head = index
  elseif index > v.head then
    for stale = v.head + 1, index do local slot = stale % 10; s[slot] = 0; fl[slot] = 0 end
    v.head = index
  end
  return index % 10
end
local function totals()
  local ss, ff = 0, 0
  for i = 0, 9 do ss = ss + s[i]; ff = ff + fl[i] end
  return ss, ff
end
local function open(old, reason)
  v.st = OPEN; v.opened = now; v['until'] = now + v.brk; v.infl = 0; v.ps = 0; v.pf = 0; v.topen = v.topen + 1
  emit(old, reason, f(v.brk))
end
local function close(reason)
  local old = v.st
  v.st = CLOSED; clear(); v.cons = 0; v.brk = base_break; v.opened = -1; v.infl = 0; v.ps = 0; v.pf = 0
  if old ~= CLOSED then emit(old, reason, '') end
end
-- probes abandoned by their callers (cancelled), or whose lease ran out (a process died mid-probe)
if v.st == HALF and released_in == v.per then
  v.infl = math.max(0, v.infl - released)
end
if v.st == HALF then
  if v.infl > 0 and now > v.lease then v.infl = 0 end
end
if v.st == OPEN and now >= v['until'] then
  v.st = HALF; v.infl = 0; v.ps = 0; v.pf = 0; v.per = v.per + 1
  emit(OPEN, 'break of ' .. string.format('%g', v.brk) .. ' s elapsed', '')
end
local result = 0
if op == 1 then
  if v.st == HALF and v.infl + v.ps + v.pf < max_probes then
    v.infl = v.infl + 1; v.lease = now + lease; result = v.per
  elseif v.st ~= CLOSED then
    v.rej = v.rej + 1; result = -1
  end
elseif op == 2 then
  if probe > 0 and v.st == HALF and probe == v.per then
    v.infl = math.max(0, v.infl - 1); v.ps = v.ps + 1
    if v.ps >= to_close then
      if to_close == 1 then close('probe succeeded') else close(to_close .. ' probes succeeded') end
    end
  elseif v.st == CLOSED then
    local slot = advance(); s[slot] = s[slot] + 1; v.cons = 0
  end
elseif op == 3 then
  if probe > 0 and v.st == HALF then
    if probe == v.per then  -- a probe of an earlier half-open period no longer votes
      v.infl = math.max(0, v.infl - 1); v.pf = v.pf + 1
      if v.pf >= to_reopen then
        v.brk = math.min(v.brk * multiplier, max_break)
        if to_reopen == 1 then open(HALF, 'probe failed') else open(HALF, to_reopen .. ' probes failed') end
      end
    end
  elseif v.st == CLOSED then
    local slot = advance(); fl[slot] = fl[slot] + 1; v.cons = v.cons + 1
    local reason = nil
    if consecutive_limit > 0 and v.cons >= consecutive_limit then
      reason = v.cons .. ' consecutive failures'
    elseif ratio_limit > 0 then
      local ss, ff = totals()
      local total = ss + ff
      local ratio = 0
      if total > 0 then ratio = ff / total end
      if total >= min_tp and ratio >= ratio_limit then
        reason = string.format('failure ratio %.3g >= %g over %d calls', ratio, ratio_limit, total)
      end
    end
    if reason then open(CLOSED, reason) end
  end
elseif op == 4 then
  if v.st ~= ISOLATED then
    local old = v.st
    v.st = ISOLATED; v.opened = now; v.infl = 0; v.ps = 0; v.pf = 0; v.topen = v.topen + 1
    emit(old, 'isolated by hand', '')
  end
elseif op == 5 then
  close('reset by hand')
end
if v.head >= 0 then advance() end
local ss, ff = totals()
local retry_after = 0
if v.st == OPEN then retry_after = math.max(0, v['until'] - now)
elseif v.st == ISOLATED then retry_after = -1
elseif v.st == HALF and v.infl + v.ps + v.pf >= max_probes then retry_after = v.brk end
local out = {}
for _, name in ipairs({'st', 'until', 'opened', 'brk', 'cons', 'infl', 'ps', 'pf', 'per', 'topen', 'rej', 'head',
                       'lease'}) do
  table.insert(out, name); table.insert(out, f(v[name]))
end
for i = 0, 9 do
  table.insert(out, 's' .. i); table.insert(out, s[i]); table.insert(out, 'f' .. i); table.insert(out, fl[i])
end
redis.call('HSET', KEYS[1], unpack(out))
local keep = ttl
if v.st == OPEN then keep = math.max(ttl, math.ceil((v['until'] - now) * 1000) + 1000) end
if v.st == ISOLATED then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], keep) end
local reply = {result, v.st, f(retry_after), ff, ss, v.cons, f(v.opened), f(v.brk), v.infl, v.topen, v.rej, f(now)}
for _, e in ipairs(events) do table.insert(reply, e) end
return reply
""")
