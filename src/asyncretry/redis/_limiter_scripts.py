"""The Lua scripts of the fleet's adaptive limiter: one per profile, each with the state under one key.

``LIMITER`` applies the ``"aws"`` profile's update (SPEC section 5) to a fleet's reports, and
``LIMITER_ASYNCRETRY`` the default profile's rules (:data:`DEFAULT_RULES`, the same formulas as
``asyncretry._primitives._adaptive_rules``). Both end the same way: take the token the call asked for, or
say how long to wait for it, and store the state; both keep the fleet's hold alike (``_HOLD``).
"""

from __future__ import annotations

from .._events import LimiterRule
from ._scripts import Script, prelude_with_clock

__all__ = ["DEFAULT_RULES", "LIMITER", "LIMITER_ASYNCRETRY", "SCRIPT_RULES", "SERVER_CLOCK", "script_rule"]

# The limiter scripts take the time as their first argument: '' (what the limiters send) reads the server's
# clock, a number is used as it is (tests drive the scripts in virtual time, and feed them the same events as
# the in-process controllers). The first argument is removed, so the others keep their places.
_LIMITER_PRELUDE = prelude_with_clock("table.remove(ARGV, 1)")

SERVER_CLOCK = ""
"""The clock argument of the limiter scripts that makes them read the server's clock."""

SCRIPT_RULES: tuple[LimiterRule, ...] = (
    "start_up", "repeat_cut", "measure", "restart_below_capacity", "recovery", "probe",
    "cubic_throttle", "cubic_success",
)
"""The rules the limiter scripts apply to a fleet, by the names of the in-process controllers' rules. A script
keeps the one that last set the fleet's fill rate as its 1-based index here (0: none yet), and returns it."""


def script_rule(index: int) -> LimiterRule | None:
    """The rule a script's reply names by its index into :data:`SCRIPT_RULES` (``None`` for 0: none yet)."""
    return SCRIPT_RULES[index - 1] if index > 0 else None

# The table from a rule's name to its index, and the state's field that holds the index.
_RULE_INDEX = (
    "local RULE = {" + ", ".join(f"{name} = {index}" for index, name in enumerate(SCRIPT_RULES, 1)) + "}\n"
    "if v.ru == nil then v.ru = 0 end\n"
)

# The "asyncretry" profile's formulas, one Lua function per Python function of the same name in
# asyncretry._primitives._adaptive_rules (tests/test_limiter_parity.py feeds both the same cases).
DEFAULT_RULES = """
local function start_rate(served, answered, min_repeat_decrease)
  if served > 0 then return served end
  return min_repeat_decrease * answered
end
local function repeat_cut(successes, throttles, repeat_decrease, min_repeat_decrease)
  local served = successes / math.max(successes + throttles, 1)
  return math.min(repeat_decrease, math.max(served, min_repeat_decrease))
end
local function hold_after(previous, capacity, counted, held, stable_change, quick, slow, settle)
  if previous <= 0 then return quick, held end
  local change = math.abs(capacity - previous) / previous
  local tolerance = math.max(stable_change, 2 / math.max(counted, 1))
  local weight = math.min(1, math.max(0, 2 - 2 * change / tolerance))
  held = held * weight
  return quick + (slow - quick) * weight * math.min(1, held / settle), held
end
local function grown_rate(capacity, fraction, elapsed, hold, doubling, step, sending, max_rate_growth)
  if elapsed < hold then return capacity * (1 - (1 - fraction) * (1 - elapsed / hold) ^ 3) + step end
  local doublings = math.min((elapsed - hold) / doubling, 64)
  return math.min(capacity * 2 ^ doublings + step, max_rate_growth * math.max(sending, capacity))
end
"""

# The two limiter scripts keep different fields under the same key: a process whose profile differs from the
# one that made the state is told so (a WRONGTYPE reply: a ConfigurationError), rather than failing on a missing
# field (an error the backend would take for Redis being down, failing every primitive on it open).
_WRONG_PROFILE = """
local WRONG_PROFILE = 'WRONGTYPE the key holds the fleet limiter state of the other profile ' ..
  '(every process must give a limiter name the same AdaptiveLimiterConfig)'
"""

# The server's clock may step back (an NTP step, a failover to a replica whose clock is behind). A limiter's
# clock does not: the times its state holds would lie in the future, which held the rate at the floor (a
# decrease "after now") and made every throttle an echo until the server's clock caught up. 'sk' is how far
# the state's clock is ahead of the server's; a step forward is taken as it comes (it looks like idle time).
_MONOTONIC = """
if v.sk == nil then v.sk = 0 end
now = now + v.sk
if now < v.ts then v.sk = v.sk + (v.ts - now); now = v.ts end
"""

# Both limiter scripts bring the bucket up to now the same way: the tokens the fill rate brought in since the
# last call and those handed back ('acc' counts every token that ever came in), before the rate changes. The
# bucket fills no faster than the pace a server announced ('qp' per second until 'qu', the state's clock), and
# holds one token at most meanwhile (the rule of asyncretry._primitives._pace.Pace and AdaptiveRateLimiter._paced
# for the fleet; tests/test_limiter_pace.py feeds both the same cases): a report's 'pace', lasting 'pace_for'
# seconds from now, replaces it when it lasts longer.
_REFILL = """if v.qu == nil then v.qp = 0; v.qu = 0 end
local function paced(rate)
  if v.qu > now then return math.min(rate, v.qp) end
  return rate
end
local function add(amount)
  local before, cap = v.tok, v.cap
  if v.qu > now then cap = math.min(cap, 1) end
  v.tok = math.min(cap, v.tok + amount)
  if v.tok > before then v.acc = v.acc + (v.tok - before) end
end
if now > v.ts then
  local rate = v.fill
  if v.qu > v.ts then rate = math.min(rate, v.qp) end
  add((now - v.ts) * rate)
end
v.ts = now
if give > 0 then add(give) end
if pace_for > 0 and now + pace_for >= v.qu then
  v.qp = pace; v.qu = now + pace_for
  v.tok = math.min(v.tok, 1)
end
local old_fill = v.fill
"""

# The fleet's hold, the same in both limiter scripts, and the paced release after it: the rule of
# asyncretry._primitives._hold.Hold, kept for the whole fleet (tests/test_limiter_hold_parity.py feeds both the
# same cases). Until when ('hu', the state's clock) a process announced the server's quota spent: a report
# that holds for 'hold_for' seconds from now makes it at least now + hold_for (the latest end wins);
# 'hold_left' is what the reply says of it. The fleet's cycle: 'hs' successes reported since 'hc' (the first
# of them, or the last hold's start; -1: none yet); 'served' the report's successes, the first 'served_age'
# seconds ago. A new
# hold's release goes one call per 'hp' seconds (the cycle's span, at most the hold's length, over its
# successes, at least one; 0 for a fleet never served: together), the next at 'hn', until 'hr'. The state is
# kept at least as long as the hold runs (capped at ten years, the longest key_ttl), so the hold of an hourly
# window outlives an idle limiter's key_ttl.
_HOLD = """if v.hu == nil then v.hu = 0 end
if v.hs == nil then v.hs = 0; v.hc = -1; v.hp = 0; v.hn = 0; v.hr = 0 end
if served > 0 then
  if v.hc < 0 then v.hc = now - math.max(0, served_age) end
  v.hs = v.hs + served
end
if hold_for > 0 and now + hold_for > v.hu then
  if v.hu <= now then
    v.hp = 0
    if v.hc >= 0 then v.hp = math.min(now - v.hc, hold_for) / math.max(v.hs, 1) end
    v.hc = now; v.hs = 0; v.hn = 0
  end
  v.hu = now + hold_for
  v.hr = v.hu
  if v.hp > 0 then v.hr = v.hu + hold_for end
end
local hold_left = math.max(0, v.hu - now)
if hold_left > 0 then ttl = math.max(ttl, math.min(math.ceil(math.max(hold_left, v.hr - now) * 1000), 315360000000)) end
"""

# Both limiter scripts end the same way: take the token the call asked for (want 1; or say how long to wait
# for it), and its place in the release after the fleet's hold while one runs (want 1 or 2, 2: the place
# alone, for a call whose place a later hold overtook; 'release': seconds from now), refusing a wait for
# either beyond max_wait; then store the state. 'wait' is the token's.
_GRANT_AND_SAVE = """local granted, wait, due, release, slot = 1, 0, v.acc, 0, now
if want >= 1 then
  if v.hr > now then slot = math.max(v.hn, v.hu, now); release = slot - now end
  if want == 1 and v.en == 1 and v.tok + v.fill * 1e-9 < 1 then wait = (1 - v.tok) / paced(v.fill) end
  if max_wait >= 0 and math.max(wait, release) > max_wait then
    granted = 0; wait = math.max(wait, release); release = 0
  else
    if want == 1 and v.en == 1 then
      v.tok = v.tok - 1
      if wait > 0 then due = v.acc - v.tok end
    end
    if v.hr > now then v.hn = slot + v.hp end
  end
end
local next_release, paced_left = 0, math.max(0, v.hr - now)
if paced_left > 0 then next_release = math.max(0, v.hn - now, v.hu - now) end
local pace_left = math.max(0, v.qu - now)
local out = {}
for _, name in ipairs(FIELDS) do table.insert(out, name); table.insert(out, f(v[name])) end
redis.call('HSET', KEYS[1], unpack(out))
redis.call('PEXPIRE', KEYS[1], ttl)"""

LIMITER = Script("limiter", _LIMITER_PRELUDE + _WRONG_PROFILE + """
-- The fleet's adaptive limiter: one CUBIC state (SPEC section 5) fed by every process's responses, and
-- one token bucket at its fill rate that every process takes its tokens from (debt = queue, as BUCKET).
-- 'acc' counts every token that ever came into the bucket (refill and hand-backs): a reservation is due
-- once 'acc' reaches the 'due' it was given, whatever the fill rate did meanwhile, so sleepers can
-- re-plan when the fleet's rate changes.
-- ARGV (after the clock): beta, C, smoothing, measurement bucket width, min_fill_rate, min_capacity, max_rate_growth,
--       responses, throttles (reported since the process's last round trip), want (0: none, 1: a token, 2: a place),
--       max_wait (-1: no limit), give_back, ttl_ms, hold_for (seconds the process holds from now; 0: none to report),
--       served (of the responses, successes), served_age (seconds since the first of them came),
--       pace (the most requests per second a server announced), pace_for (seconds it lasts from now; 0: none)
local beta, C, smoothing, width = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local min_fill, min_cap, growth = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local responses, throttles, want = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local max_wait, give, ttl = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local hold_for, served, served_age = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local pace, pace_for = tonumber(ARGV[17]), tonumber(ARGV[18])
local FIELDS = {'en', 'fill', 'cap', 'tok', 'ts', 'mr', 'lb', 'cnt', 'wmax', 'ltt', 'k', 'acc', 'sk', 'ru',
                'hu', 'hs', 'hc', 'hp', 'hn', 'hr', 'qp', 'qu'}
local raw = redis.call('HMGET', KEYS[1], unpack(FIELDS))
local v = {}
for i, name in ipairs(FIELDS) do v[name] = tonumber(raw[i]) end
if v.en ~= nil and v.lb == nil then return redis.error_reply(WRONG_PROFILE) end
if v.en == nil then
  v = {en = 0, fill = min_fill, cap = min_cap, tok = 0, ts = now, mr = 0, lb = math.floor(now), cnt = 0,
       wmax = 0, ltt = now, k = 0, acc = 0, sk = 0}
end
""" + _RULE_INDEX + _MONOTONIC + _REFILL + """if responses > 0 then
  local scale = 1 / width
  local bucket = math.floor(now * scale) / scale
  v.cnt = v.cnt + responses
  if bucket > v.lb then
    v.mr = smoothing * v.cnt / (bucket - v.lb) + (1 - smoothing) * v.mr
    v.cnt = 0; v.lb = bucket
  end
  local function apply(new_rate, rule)
    v.fill = math.max(new_rate, min_fill); v.cap = math.max(new_rate, min_cap); v.ru = RULE[rule]
  end
  if throttles > 0 then
    for _ = 1, math.min(throttles, 64) do
      local use = v.mr
      if v.en == 1 then use = math.min(v.mr, v.fill) end
      v.wmax = use; v.k = (use * (1 - beta) / C) ^ (1 / 3); v.ltt = now; v.en = 1
      apply(math.min(use * beta, growth * v.mr), 'cubic_throttle')
    end
  else
    apply(math.min(C * ((now - v.ltt) - v.k) ^ 3 + v.wmax, growth * v.mr), 'cubic_success')
  end
  v.tok = math.min(v.tok, v.cap)
end
""" + _HOLD + _GRANT_AND_SAVE + """
return {granted, f(wait), v.en, f(v.fill), f(v.cap), f(v.tok), f(v.mr), f(v.wmax), f(v.ltt), f(now), f(old_fill),
        f(v.acc), f(due), v.ru, f(hold_left), f(release), f(next_release), f(paced_left), f(v.qp), f(pace_left)}
""")

LIMITER_ASYNCRETRY = Script("limiter-asyncretry", _LIMITER_PRELUDE + _WRONG_PROFILE + DEFAULT_RULES + """
-- The fleet's adaptive limiter, default ("asyncretry") profile: AsyncretryRateController's rules applied to
-- the whole fleet's responses, and one token bucket at the resulting fill rate that every process takes its
-- tokens from (as LIMITER). Time is the server's: the processes send the send times of their throttled
-- requests on the server's clock, so a throttle of a request sent before the fleet's last decrease is an
-- echo whichever process decreased. Successes are counted when reported (one request after their answer),
-- in slots of measurement_window / 20, so the served rate is the fleet's over recent spans. Outages are not
-- detected (a run of 503s only stops the growth). A call that must wait is told when the rate of the recovery (the
-- climb back to the estimate, then the probe) brings its token in, not when the rate of the moment would.
-- ARGV (after the clock): utilization, repeat_decrease, min_repeat_decrease, reaction_time, measurement_window,
--       recovery_time, quick_recovery_time, stable_change, settle_time, probe_doubling_time, burst, growth_margin,
--       max_rate_growth, min_fill_rate, min_capacity (the config: 1-15),
--       successes, failures (reported since the last round trip), want (0-2, as LIMITER), max_wait (-1: no limit),
--       give_back, ttl_ms (16-21), hold_for (22; seconds the process holds from now, 0: none to report),
--       when the oldest of the reported answers came (23; server clock, 0: now), seconds since the first of the
--       reported successes came (24), pace and pace_for (25-26, as LIMITER's),
--       then the send times of the reported throttles (server clock, any order; 0 for a request its
--       process sent free, before it heard that the limiter was enabled)
local util, repeat_dec, min_cut = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local reaction, window, slow = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local quick, stable, settle = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local doubling, burst, margin = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local growth, min_fill, min_cap = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local ok, failed, want = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18])
local max_wait, give, ttl = tonumber(ARGV[19]), tonumber(ARGV[20]), tonumber(ARGV[21])
local hold_for, oldest, served_age = tonumber(ARGV[22]), tonumber(ARGV[23]), tonumber(ARGV[24])
local pace, pace_for = tonumber(ARGV[25]), tonumber(ARGV[26])
local served = ok
local sends = {}
for i = 27, #ARGV do table.insert(sends, tonumber(ARGV[i])) end
table.sort(sends)
local SLOTS = 21
local width = window / 20
local FIELDS = {'en', 'fill', 'cap', 'tok', 'ts', 'acc', 'srv', 'ans', 'dec', 'est', 'rec', 'frac', 'mkt', 'mks',
                'stab', 'st', 'first', 'fs', 'ft', 'gh', 'sk', 'ru', 'hu', 'hs', 'hc', 'hp', 'hn', 'hr', 'qp', 'qu'}
for i = 0, SLOTS - 1 do table.insert(FIELDS, 'g' .. i) end
for i = 0, SLOTS - 1 do table.insert(FIELDS, 'a' .. i) end
local raw = redis.call('HMGET', KEYS[1], unpack(FIELDS))
local v = {}
for i, name in ipairs(FIELDS) do v[name] = tonumber(raw[i]) end
if v.en ~= nil and v.gh == nil then return redis.error_reply(WRONG_PROFILE) end
if v.en == nil then
  v = {en = 0, fill = min_fill, cap = min_cap, tok = 0, ts = now, acc = 0, srv = 0, ans = 0, dec = -1, est = 0,
       rec = quick, frac = util, mkt = now, mks = 0, stab = now, st = 0, first = -1, fs = 0, ft = 0,
       gh = math.floor(now / width), sk = 0}
  for i = 0, SLOTS - 1 do v['g' .. i] = 0; v['a' .. i] = 0 end
end
""" + _RULE_INDEX + _MONOTONIC + _REFILL + """
-- slot counters of successes (g) and of all answers (a), newest slot index gh; slot i holds index i mod SLOTS
local index = math.floor(now / width)
if index > v.gh then
  for k = math.max(v.gh + 1, index - SLOTS + 1), index do
    v['g' .. (k % SLOTS)] = 0; v['a' .. (k % SLOTS)] = 0
  end
  v.gh = index
end
local slot = v.gh % SLOTS
local answered = ok + failed + #sends
v['g' .. slot] = v['g' .. slot] + ok
v['a' .. slot] = v['a' .. slot] + answered
v.srv = v.srv + ok
v.ans = v.ans + answered
if v.mks < 0 and now >= v.mkt then v.mkt = now; v.mks = v.srv end
-- the first answer, not the first round trip (a process may connect long before it sends); a report
-- gathers a process's answers since its last, the oldest of which came at 'oldest'
if answered > 0 then
  local at = now
  if oldest > 0 then at = math.min(now, oldest + v.sk) end
  if v.first < 0 or at < v.first then v.first = at end
end
-- the rate of g (or a) over about the last span seconds: whole slots, the current one partly
local function rate(prefix, span)
  local n = math.max(1, math.min(SLOTS, math.floor(span / width + 0.5)))
  local total = 0
  for k = v.gh - n + 1, v.gh do total = total + v[prefix .. (k % SLOTS)] end
  local covered = (n - 1) * width + math.min(math.max(now - v.gh * width, 0), width)
  if covered <= 0 then return total / width end
  return total / covered
end
local function set(r, rule)
  v.fill = math.max(r, min_fill); v.cap = math.max(v.fill * burst, min_cap); v.ru = RULE[rule]
end
local restarted = false
local function restart(capacity, fraction, hold, rule)
  restarted = true
  v.est = capacity; v.dec = now; v.frac = fraction; v.rec = hold; v.fs = 0; v.ft = 0
  -- the capacity is measured from reaction_time after the decrease on: until then the answers to what was
  -- sent at the old rate (throttles among them) take the fleet's tokens, and would bias it low
  v.mkt = now + reaction; v.mks = -1
  set(fraction * capacity, rule)
end
local function recovery_after(capacity, counted)
  -- up to recovery_time when the measurement confirms the estimate, quick_recovery_time when it moved it
  local hold, held = hold_after(v.est, capacity, counted, now - v.stab, stable, quick, slow, settle)
  v.stab = now - held
  return hold
end
local function start_up()
  -- start_up: start from what the fleet was served so far (or a share of what it sent), not from the floor
  -- every answer so far, over the time since the first plus a slot; past a window, the last window's rate
  -- (as the controller's counters, SlidingCounter.rate_so_far)
  local so_far, served, answered = now - v.first + width, 0, 0
  if so_far <= window then
    served, answered = v.srv / so_far, v.ans / so_far
  else
    served, answered = rate('g', window), rate('a', window)
  end
  local base = start_rate(served, answered, min_cut)
  -- a later answer of the same round trip may raise the start, never lower it
  if v.en == 1 then base = math.max(base, v.est) end
  local dec = v.dec
  if v.en == 0 then dec = now end
  v.en = 1; v.st = 1
  restart(base, repeat_dec, quick, 'start_up')
  v.dec = dec  -- echoes of the same round trip do not move the event
end
for _, sent in ipairs(sends) do
  local fresh = sent > v.dec
  if v.en == 0 or (v.st == 1 and not fresh) then
    start_up()
  elseif fresh then
    v.st = 0
    if sent - v.dec < reaction then
      -- repeat_cut: a second fresh throttle right after a decrease: the capacity fell further
      v.ft = v.ft + 1
      if v.ft >= 2 then
        v.stab = now
        restart(v.fill, repeat_cut(v.fs, v.ft, repeat_dec, min_cut), quick, 'repeat_cut')
      end
    else
      -- the measurement: the capacity is what the server admitted to the fleet since the last event
      local capacity = -1
      local counted = v.srv - v.mks
      if v.mks >= 0 and now - v.mkt >= reaction then capacity = counted / (now - v.mkt) end
      local span = math.min(window, now - v.dec)
      local lately = rate('g', span)
      -- The count from reaction_time after the decrease also holds what the server's bucket took in meanwhile
      -- (it was empty at the decrease: a throttle's): a lower served rate since the decrease measures better.
      if capacity < 0 or lately < capacity or lately > (1 + margin) * capacity then
        capacity = lately; counted = lately * span
      end
      capacity = math.min(capacity, v.fill)
      if capacity <= 0 then
        restart(v.fill, repeat_dec, quick, 'measure')
      else
        restart(capacity, util, recovery_after(capacity, counted), 'restart_below_capacity')
      end
    end
  end
end
if ok > 0 and v.en == 1 then
  v.fs = v.fs + ok
  if not restarted then
    -- the recovery: recover to the estimate along a concave curve, then probe above it
    local rule = 'probe'
    if now - v.dec < v.rec then rule = 'recovery' end
    set(grown_rate(math.max(v.est, min_fill), v.frac, now - v.dec, v.rec, doubling, 0, rate('a', reaction), growth),
        rule)
  end
end
v.tok = math.min(v.tok, v.cap)
""" + _HOLD + _GRANT_AND_SAVE + """
if wait > 0 and granted == 1 and paced(v.fill) == v.fill then
  -- The wake-up time follows the rate the recovery predicts (the climb back to the estimate, then the probe),
  -- not the rate of now: a sleeper that woke late while the probe raised the rate would find its token long
  -- due, and when the probe's throttle cut the rate, the fleet's overdue sleepers would all still go out
  -- at the probe's rate (the overshoot). Tokens the rate brings in over [now, now + span]:
  local capacity, probe_at, ln2 = math.max(v.est, min_fill), v.dec + v.rec, math.log(2)
  local function brought(span)
    local t1, t2, total = now, now + span, 0
    if t1 < probe_at then
      local e1, e2 = (t1 - v.dec) / v.rec, (math.min(t2, probe_at) - v.dec) / v.rec
      total = capacity * v.rec * ((e2 - e1) + (1 - v.frac) * ((1 - e2) ^ 4 - (1 - e1) ^ 4) / 4)
      t1 = math.min(t2, probe_at)
    end
    if t2 > t1 then
      local x1, x2 = math.min((t1 - probe_at) / doubling, 64), math.min((t2 - probe_at) / doubling, 64)
      total = total + capacity * doubling / ln2 * (2 ^ x2 - 2 ^ x1)
    end
    return total
  end
  -- the rate only grows along the curve, so the wait at today's rate bounds it: bisect below that
  local need, lo, hi = wait * v.fill, 0, wait
  if brought(hi) > need then
    for _ = 1, 30 do
      local mid = (lo + hi) / 2
      if brought(mid) >= need then hi = mid else lo = mid end
    end
    wait = hi
  end
end
local last = v.dec
if v.en == 0 then last = now end
return {granted, f(wait), v.en, f(v.fill), f(v.cap), f(v.tok), f(rate('a', window)), f(v.est), f(last), f(now),
        f(old_fill), f(v.acc), f(due), v.ru, f(hold_left), f(release), f(next_release), f(paced_left), f(v.qp),
        f(pace_left)}
""")
