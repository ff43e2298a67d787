/**
 * The shared limiter's Lua scripts (docs/scale-out.md, "How the counts are shared"). A window of a subject is one
 * hash: its start (`s`) and, per instance (a process's random id), how many that instance admitted in it; the
 * total is their sum. An instance is the only one to write its own field, so what it says of its own count
 * can be written again, late or twice, without counting anything twice: a raise sets its field to what it
 * admitted, and a raise or a decision sent before a later raise of the same instance does nothing once that
 * raise has run (each carries the instance's sequence number; the subject's `raised` hash keeps the last).
 */

/** Redis's clock in epoch ms; or ARGV[1] when it is not 0 (a test's fake clock). */
const NOW = `local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

/** How long a window's hash outlives its window (by Redis's clock), so that an instance a little behind it still finds it. */
export const COUNTER_MARGIN_MS = 5000;

/** A block above one request is granted only while every window has this many blocks left: a window's last quota goes one by one. */
const BLOCK_HEADROOM = 10;

/** Whether the call was sent before a raise of this instance that has run since: then it must do nothing. */
const STALE = `local raised = tonumber(redis.call('HGET', KEYS[#KEYS], ARGV[2]))
if raised and raised > tonumber(ARGV[3]) then return {-1, now} end`;

/** Reads window i's hash into total[i] and own[i], both 0 unless it holds the window starting at starts[i]. */
const READ_WINDOW = `local function read(i)
  local fields = redis.call('HGETALL', KEYS[i])
  local total, own, s = 0, 0, nil
  for j = 1, #fields, 2 do
    local f = fields[j]
    if f == 's' then
      s = tonumber(fields[j + 1])
    else
      local v = tonumber(fields[j + 1])
      total = total + v
      if f == ARGV[2] then own = v end
    end
  end
  if s ~= starts[i] then return 0, 0, true end
  return total, own, false
end`;

/** Begins window i's hash at starts[i] (whatever an earlier window left in it goes), to expire after it. */
const BEGIN_WINDOW = `local function begin(i, length)
  redis.call('DEL', KEYS[i])
  redis.call('HSET', KEYS[i], 's', starts[i])
  redis.call('PEXPIRE', KEYS[i], starts[i] + length + ${COUNTER_MARGIN_MS} - now)
end`;

/**
 * A decision. KEYS: the window hashes, then the subject's `raised`. ARGV: the test's clock (0: Redis's), this
 * instance's id, its sequence number, 1 to count or 0 to look, the block wanted (1: this request alone), then
 * limit and length per window. Returns { requests counted (0: refused or looked only; -1: stale, nothing
 * done), now, then per window its total and this instance's part, after the decision }.
 */
export const DECIDE = `${NOW}
${STALE}
local starts, totals, owns, fresh = {}, {}, {}, {}
${READ_WINDOW}
${BEGIN_WINDOW}
local admitted = true
local size = tonumber(ARGV[5])
local n = #KEYS - 1
for i = 1, n do
  local limit, length = tonumber(ARGV[i * 2 + 4]), tonumber(ARGV[i * 2 + 5])
  starts[i] = now - now % length
  totals[i], owns[i], fresh[i] = read(i)
  if totals[i] >= limit then admitted = false end
  if size > 1 and limit - totals[i] < size * ${BLOCK_HEADROOM} then size = 1 end
end
if not admitted or ARGV[4] ~= '1' then size = 0 end
if size > 0 then
  for i = 1, n do
    if fresh[i] then begin(i, tonumber(ARGV[i * 2 + 5])) end
    owns[i] = owns[i] + size
    totals[i] = totals[i] + size
    redis.call('HSET', KEYS[i], ARGV[2], owns[i])
  end
end
local reply = {size, now}
for i = 1, n do
  reply[i * 2 + 1] = totals[i]
  reply[i * 2 + 2] = owns[i]
end
return reply`;

/**
 * A block's unspent requests handed back. KEYS: the window hashes the block was counted in, then `raised`.
 * ARGV: the test's clock, id, sequence number, the unspent count, then the start of each window the block
 * was counted in. A window that has moved on keeps its count. Returns { 1 per window that took them back, else 0 }.
 */
export const HAND_BACK = `${NOW}
${STALE}
local reply = {}
for i = 1, #KEYS - 1 do
  reply[i] = 0
  if tonumber(redis.call('HGET', KEYS[i], 's')) == tonumber(ARGV[i + 4]) then
    local own = tonumber(redis.call('HGET', KEYS[i], ARGV[2])) or 0
    redis.call('HSET', KEYS[i], ARGV[2], math.max(0, own - tonumber(ARGV[4])))
    reply[i] = 1
  end
end
return reply`;

/**
 * A raise: this instance's own count in each window set to what it admitted there, absolute. KEYS: the window
 * hashes, then `raised`. ARGV: the test's clock, id, its new sequence number, how long `raised` is kept (ms),
 * then per window the start this instance counted in, the length and its count there. Windows are Redis's:
 * what the instance counted in Redis's current window, or in a later one (its clock ahead), is its part of
 * Redis's current window; counted in an earlier one, it has no part in the current one (a decision that ran
 * after its caller gave up may have put one there). Returns 1, or 0 when a later raise has run already.
 */
export const RAISE = `${NOW}
local raised = tonumber(redis.call('HGET', KEYS[#KEYS], ARGV[2]))
if raised and raised >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[#KEYS], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[#KEYS], tonumber(ARGV[4]))
local starts = {}
${BEGIN_WINDOW}
for i = 1, #KEYS - 1 do
  local start, length, own = tonumber(ARGV[i * 3 + 2]), tonumber(ARGV[i * 3 + 3]), tonumber(ARGV[i * 3 + 4])
  starts[i] = now - now % length
  if start < starts[i] then own = 0 end
  local s = tonumber(redis.call('HGET', KEYS[i], 's'))
  if s == starts[i] then
    if own > 0 then redis.call('HSET', KEYS[i], ARGV[2], own) else redis.call('HDEL', KEYS[i], ARGV[2]) end
  elseif own > 0 and (s == nil or s < starts[i]) then
    begin(i, length)
    redis.call('HSET', KEYS[i], ARGV[2], own)
  end
end
return 1`;

/**
 * KEYS[1]: the mark. ARGV: the test's clock (0: Redis's), the end of the mark's period (epoch ms). Returns { the
 * first mark of the period (now when this is it), now }. Setting only what is absent, it may run again or late.
 */
export const MARK = `${NOW}
local first = redis.call('GET', KEYS[1])
if first then return {tonumber(first), now} end
local ttl = tonumber(ARGV[2]) - now
if ttl > 0 then redis.call('SET', KEYS[1], now, 'PX', ttl) end
return {now, now}`;
