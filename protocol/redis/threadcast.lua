#!lua name=threadcast
--
-- threadcast's producer contract: atomic appends of a thread's events.
--
--   FCALL threadcast_append 1 <thread_id> <event-json> [MAXLEN n] [TTL s] [RUN run_id]
--     -> the new seq
--   FCALL threadcast_append_batch 1 <thread_id> <count> <event-json>... [MAXLEN n] [TTL s] [RUN run_id]
--     -> the seq of the batch's first event (the others follow it, in order)
--
-- Each validates its events (a bad call gets an error that says what is wrong
-- and changes nothing: a batch is appended whole or not at all), assigns the
-- thread's next seqs, appends them to the thread's stream as entries <seq>-0,
-- trims, keeps the thread's keys alive, maintains the run, tree, values,
-- interrupts and checkpoint indexes, and SPUBLISHes one doorbell (sharded
-- pub/sub) for the call. Event data may spell the protocol's field names
-- either way (graph_name or graphName, interrupt_id or interruptId,
-- interrupt_ids or interruptIds). protocol/README.md documents every key and
-- field.
--
-- Cost is what this file is written around: per event, one XADD and a
-- handful of Lua string operations; per call, one HMGET, one HINCRBY, one
-- TIME and one SPUBLISH. The keys' TTLs are refreshed only when an eighth of
-- the TTL has passed since the last refresh (an idle thread's keys expire
-- between 7/8 of the TTL and the TTL after its last event), and the rarely
-- written indexes get theirs when they are written.

local DEFAULT_MAXLEN = 10000
local DEFAULT_TTL = 86400
-- Numbers handed to redis.call are formatted with sprintf on every call; the
-- options keep the text they came as (or these) for the calls.
local DEFAULT_MAXLEN_ARG = '' .. DEFAULT_MAXLEN
local DEFAULT_TTL_ARG = '' .. DEFAULT_TTL
local MAX_EVENT_BYTES = 1048576
local MAX_BATCH = 1000
local MAX_SEGMENTS = 32

local STATUSES = { started = true, running = true, completed = true, failed = true,
                   interrupted = true }
local METHODS = { values = true, updates = true, messages = true, tools = true,
                  lifecycle = true, ['input.requested'] = true, ['input.answered'] = true,
                  checkpoints = true, tasks = true, custom = true }
-- "event 1" … "event 64", made once: batches name their events in errors.
local EVENT_NAMES = {}
for i = 1, 64 do EVENT_NAMES[i] = 'event ' .. i end
local USAGE = 'usage: FCALL threadcast_append 1 <thread_id> <event-json> [MAXLEN n] [TTL s] [RUN run_id], ' ..
              'or FCALL threadcast_append_batch 1 <thread_id> <count> <event-json>... [options]'

-- An error reply; error() carries it out of nested calls to the entry point
-- (as a string: Redis 7.0's pcall turns error tables into strings).
local FAIL = 'threadcast: '
local function fail(msg)
  error(FAIL .. msg, 0)
end

-- The namespace encoding of protocol/README.md: "/" before each segment,
-- with "%", "/" and control characters written as %XX.
local function encode_ns(ns)
  local out = {}
  for i = 1, #ns do
    out[i] = '/' .. string.gsub(ns[i], '[%%/%c]', function(c)
      return string.format('%%%02X', string.byte(c))
    end)
  end
  return table.concat(out)
end

-- Position just after the '{' that opens the top-level "params" object of a
-- JSON text already known to be valid, or nil. The usual shape,
-- {"method":"…","params":{…, is recognized by one pattern; anything else is
-- scanned with strings skipped whole, so braces or the word params inside
-- them do not confuse it.
local function params_body_start(json)
  local _, e = string.find(json, '^{%s*"method"%s*:%s*"[^"\\]*"%s*,%s*"params"%s*:%s*{')
  if e then return e + 1 end
  local i, n, depth = 1, #json, 0
  while i <= n do
    local c = string.sub(json, i, i)
    if c == '"' then
      local j = i + 1
      while true do
        local q = string.find(json, '["\\]', j)
        if not q then return nil end
        if string.sub(json, q, q) == '\\' then j = q + 2 else j = q; break end
      end
      if depth == 1 and string.sub(json, i, j) == '"params"' then
        local k = string.find(json, '[^%s]', j + 1)
        if k and string.sub(json, k, k) == ':' then
          k = string.find(json, '[^%s]', k + 1)
          if k and string.sub(json, k, k) == '{' then return k + 1 end
        end
      end
      i = j + 1
    else
      if c == '{' or c == '[' then depth = depth + 1
      elseif c == '}' or c == ']' then depth = depth - 1 end
      i = i + 1
    end
  end
  return nil
end

local function is_array_of_strings(t)
  if type(t) ~= 'table' then return false end
  local n = 0
  for k, v in pairs(t) do
    if type(k) ~= 'number' or type(v) ~= 'string' then return false end
    n = n + 1
  end
  for i = 1, n do if t[i] == nil then return false end end
  return true
end

-- Surrounding whitespace goes; a text that has none is left as it is.
local function trim(json)
  local first, last = string.byte(json, 1), string.byte(json, -1)
  if first == 123 and last == 125 then return json end -- '{' ... '}'
  return string.match(json, '^%s*(.*%S)') or ''
end

-- Parses the options after the events: MAXLEN, TTL, RUN, ASSISTANT.
local function options(args, i)
  local o = { maxlen = DEFAULT_MAXLEN_ARG, ttl = DEFAULT_TTL, ttl_arg = DEFAULT_TTL_ARG }
  while i <= #args do
    local opt, val = string.upper(args[i]), args[i + 1]
    if val == nil then fail(opt .. ' needs a value') end
    if opt == 'MAXLEN' then
      if not string.match(val, '^[1-9]%d*$') or #val > 18 then fail('MAXLEN must be a positive integer (at most 18 digits)') end
      o.maxlen = val
    elseif opt == 'TTL' then
      if not string.match(val, '^[1-9]%d*$') or #val > 10 then fail('TTL must be a positive integer (seconds, at most 10 digits)') end
      o.ttl, o.ttl_arg = tonumber(val), val
    elseif opt == 'RUN' then
      if #val < 1 or #val > 128 or string.find(val, '%c') then fail('RUN must be 1 to 128 printable characters') end
      o.run_id = val
    elseif opt == 'ASSISTANT' then
      if #val < 1 or #val > 128 or string.find(val, '[%c%s]') then fail('ASSISTANT must be 1 to 128 printable characters, no spaces') end
      o.assistant = val
    else
      fail('unknown option ' .. args[i] .. ' (expected MAXLEN, TTL, RUN or ASSISTANT)')
    end
    i = i + 2
  end
  return o
end

-- Validates one event and works out what storing it needs. `what` names it
-- in errors ("event", "event 3"). now_ms fills a missing timestamp.
local function prepare(json, what, now_ms)
  if #json > MAX_EVENT_BYTES then
    fail(what .. ' is ' .. #json .. ' bytes; the limit is ' .. MAX_EVENT_BYTES)
  end
  local ok, ev = pcall(cjson.decode, json)
  if not ok or type(ev) ~= 'table' then fail(what .. ' must be a JSON object') end
  json = trim(json)
  if string.byte(json) ~= 123 then fail(what .. ' must be a JSON object') end -- '{'
  if ev.type ~= nil or ev.eventId ~= nil or ev.event_id ~= nil or ev.seq ~= nil then
    fail(what .. ' must not carry "type", "eventId"/"event_id" or "seq": threadcast assigns them')
  end
  local method = ev.method
  if type(method) ~= 'string' then fail(what .. '.method must be a string') end
  if not METHODS[method] and not string.match(method, '^custom:[^%c]+$') then
    fail(what .. '.method "' .. method .. '" is not an event method (values, updates, messages, tools, lifecycle, input.requested, input.answered, checkpoints, tasks, custom, custom:<name>)')
  end
  local params = ev.params
  if type(params) ~= 'table' then fail(what .. '.params must be an object') end
  local ns = params.namespace
  local nsenc = ''
  if type(ns) ~= 'table' or next(ns) ~= nil then -- not [] (the usual case)
    if not is_array_of_strings(ns) then fail(what .. '.params.namespace must be an array of strings') end
    if #ns > MAX_SEGMENTS then fail(what .. '.params.namespace has more than ' .. MAX_SEGMENTS .. ' segments') end
    nsenc = encode_ns(ns)
  end
  local data = params.data
  if data == nil then fail(what .. '.params.data is required') end
  local p = { method = method, nsenc = nsenc }
  if method == 'lifecycle' then
    if type(data) ~= 'table' or not STATUSES[data.event] then
      fail('lifecycle ' .. what .. '.params.data.event must be started, running, completed, failed or interrupted')
    end
    p.status = data.event
    local graph = data.graph_name
    if type(graph) ~= 'string' then graph = data.graphName end
    p.graph = type(graph) == 'string' and graph or nil
  elseif method == 'input.requested' then
    local id = type(data) == 'table' and (data.interrupt_id or data.interruptId)
    if type(id) ~= 'string' or id == '' then
      fail('input.requested ' .. what .. '.params.data.interrupt_id must be a non-empty string')
    end
    p.interrupt_id = id
  elseif method == 'input.answered' then
    local ids = type(data) == 'table' and (data.interrupt_ids or data.interruptIds)
    if not is_array_of_strings(ids) then
      fail('input.answered ' .. what .. '.params.data.interrupt_ids must be an array of strings')
    end
    p.answered = ids
  end
  if params.timestamp == nil then
    local at = params_body_start(json)
    if not at then fail(what .. '.params must be written as a plain "params" key') end
    local sep = string.match(json, '^%s*}', at) and '' or ','
    json = string.sub(json, 1, at - 1) .. '"timestamp":' .. now_ms .. sep .. string.sub(json, at)
  elseif type(params.timestamp) ~= 'number' or params.timestamp < 0 then
    fail(what .. '.params.timestamp must be a non-negative number (ms since the epoch)')
  end
  p.json = json
  return p
end

-- Appends prepared events to thread tid; returns the first seq.
local function store(tid, events, o, now)
  -- Each key name is a new Lua string (hashed byte by byte): the three every
  -- call needs are made here, the rarely written ones where they are written.
  local pre = 'tc:{' .. tid .. '}:'
  local k_meta, k_events = pre .. 'meta', pre .. 'events'
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local n = #events

  local m = redis.call('HMGET', k_meta, 'epoch', 'expires_at', 'ttl')
  local epoch, last = m[1], nil
  local ttl, ttl_s = o.ttl_arg, o.ttl
  if not epoch then
    -- A new history: whatever is left under the other keys belongs to an
    -- older one (meta expired or was deleted) and must not mix with it.
    -- Many threads live for a few events, so this is one HSET, and only
    -- meta and events (below) need a TTL: the others were just deleted,
    -- and an event that makes one again sets its TTL as it writes it.
    redis.call('DEL', k_events, pre .. 'tree', pre .. 'values', pre .. 'interrupts')
    epoch = string.format('%x%05x', tonumber(now[1]), tonumber(now[2]))
    last = n
    redis.call('HSET', k_meta, 'epoch', epoch, 'run_seq', 1, 'run_id', epoch .. '-1', 'seq', n,
               'expires_at', now_ms + ttl_s * 1000, 'ttl', ttl)
  else
    last = redis.call('HINCRBY', k_meta, 'seq', n)
  end
  -- The graph the thread runs: gateways route its commands to its workers.
  if o.assistant then redis.call('HSET', k_meta, 'assistant_id', o.assistant) end
  local first = last - n + 1
  local sfirst = '' .. first -- a number is formatted (sprintf) each time it meets a string

  -- Keys written rarely get their TTL when written (touch): a key made
  -- between two refreshes of an idle thread must not outlive it.
  local bell = n > 1 and { '*', epoch, '\n', sfirst, '\n', n, '\n' } or nil
  for i = 1, n do
    local e, seq = events[i], first + i - 1
    local id = (i == 1 and sfirst or '' .. seq) .. '-0'
    if i == n then
      redis.call('XADD', k_events, 'MAXLEN', '~', o.maxlen, id, 'm', e.method, 'n', e.nsenc, 'e', e.json)
    else
      redis.call('XADD', k_events, id, 'm', e.method, 'n', e.nsenc, 'e', e.json)
    end
    if e.method == 'lifecycle' then
      local k_tree, k_interrupts = pre .. 'tree', pre .. 'interrupts'
      if e.nsenc == '' and e.status == 'started' then
        redis.call('DEL', k_tree, k_interrupts)
        redis.call('HSET', k_meta, 'run_seq', seq, 'run_id', o.run_id or (epoch .. '-' .. seq))
      elseif e.nsenc == '' and (e.status == 'completed' or e.status == 'failed') then
        redis.call('DEL', k_interrupts) -- the run is over: nothing waits for an answer
      end
      local graph = e.graph
      if not graph then
        local old = redis.call('HGET', k_tree, e.nsenc)
        graph = old and string.match(old, '^[^\n]*\n(.*)$') or ''
      end
      redis.call('HSET', k_tree, e.nsenc, e.status .. '\n' .. graph)
      redis.call('EXPIRE', k_tree, ttl)
      if e.nsenc == '' then redis.call('HSET', k_meta, 'run_status', e.status) end
    elseif e.method == 'values' then
      local k_values = pre .. 'values'
      redis.call('HSET', k_values, e.nsenc, seq .. '\n' .. e.json)
      redis.call('EXPIRE', k_values, ttl)
    elseif e.method == 'input.requested' then
      local k_interrupts = pre .. 'interrupts'
      redis.call('HSET', k_interrupts, e.interrupt_id, seq .. '\n' .. e.json)
      redis.call('EXPIRE', k_interrupts, ttl)
    elseif e.method == 'input.answered' then
      local k_interrupts = pre .. 'interrupts'
      for _, a in ipairs(e.answered) do redis.call('HDEL', k_interrupts, a) end
    elseif e.method == 'checkpoints' and e.nsenc == '' then
      redis.call('HSET', k_meta, 'checkpoint', seq .. '\n' .. e.json)
    end
    if bell then -- pieces, joined once at the end
      local b = #bell
      bell[b + 1], bell[b + 2], bell[b + 3], bell[b + 4] = e.method, '\n', e.nsenc, '\n'
      bell[b + 5], bell[b + 6], bell[b + 7] = #e.json, '\n', e.json
    end
  end

  -- Every key of the thread lives TTL seconds past a refresh; refreshed once
  -- an eighth of the TTL has passed (or the TTL asked for changed).
  local expires_at = tonumber(m[2])
  if not m[1] then
    redis.call('EXPIRE', k_meta, ttl)
    redis.call('EXPIRE', k_events, ttl) -- made by this call's XADD
  elseif m[3] ~= ttl or not expires_at or expires_at - now_ms < ttl_s * 875 then
    for _, k in ipairs({ k_meta, k_events, pre .. 'tree', pre .. 'values', pre .. 'interrupts' }) do
      redis.call('EXPIRE', k, ttl)
    end
    redis.call('HSET', k_meta, 'expires_at', now_ms + ttl_s * 1000, 'ttl', ttl)
  end

  -- One doorbell for the call. One event: "<epoch>\n<seq>\n<method>\n<ns>\n<json>";
  -- a batch: "*<epoch>\n<first seq>\n<count>\n" then per event
  -- "<method>\n<ns>\n<json length>\n<json>".
  local live = pre .. 'live'
  if n == 1 then
    local e = events[1]
    redis.call('SPUBLISH', live, epoch .. '\n' .. sfirst .. '\n' .. e.method .. '\n' .. e.nsenc .. '\n' .. e.json)
  else
    redis.call('SPUBLISH', live, table.concat(bell))
  end
  return first
end

local function check_thread(tid)
  if type(tid) ~= 'string' or #tid < 1 or #tid > 128 or not string.match(tid, '^[%w%._:%-]+$') then
    fail('thread id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -')
  end
end

-- Runs f, turning fail()'s errors into error replies.
local function guarded(f)
  return function(keys, args)
    local ok, res = pcall(f, keys, args)
    if ok then return res end
    if type(res) == 'string' and string.sub(res, 1, #FAIL) == FAIL then
      return redis.error_reply('ERR ' .. res)
    end
    error(res, 0)
  end
end

local function append(keys, args)
  check_thread(keys[1])
  if not args[1] then fail(USAGE) end
  local o = options(args, 2)
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  return store(keys[1], { prepare(args[1], 'event', now_ms) }, o, now)
end

local function append_batch(keys, args)
  check_thread(keys[1])
  local n = tonumber(args[1])
  if not n or n < 1 or n ~= math.floor(n) or n > MAX_BATCH then
    fail('count must be an integer from 1 to ' .. MAX_BATCH .. '; ' .. USAGE)
  end
  if #args < n + 1 then fail('count is ' .. n .. ' but only ' .. (#args - 1) .. ' events follow') end
  local o = options(args, n + 2)
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local events = {}
  for i = 1, n do events[i] = prepare(args[i + 1], EVENT_NAMES[i] or ('event ' .. i), now_ms) end
  return store(keys[1], events, o, now)
end

-- ==== the command bridge's routing =====================================================
--
-- Workers register the assistants (graphs) they serve; a gateway sends a
-- command to the stream of the assistant it is for, or refuses it at once
-- when no live worker serves it. Every key has the hash tag {tc:commands}
-- (the slot of tc:commands, the wildcard workers' stream).
--
--   FCALL threadcast_register 2 {tc:commands}:w:<assistant> {tc:commands}:assistants
--         <assistant> <worker> <live ms>                      -> 1
--     the worker counts as live for <live ms> (Redis' clock); "*" serves any
--     assistant, from tc:commands.
--   FCALL threadcast_submit 4 tc:commands {tc:commands}:w:* {tc:commands}:w:<a> {tc:commands}:a:<a>
--         <a> <thread> <method> <params> <corr> <reply> <deadline>   -> the stream it went to
--     <a> may be "" (a thread that has not run): the wildcard workers, else
--     the one assistant that has live workers, if there is just one.

local COMMANDS_MAXLEN = 100000
local MAX_LIVE_LIST = 16

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function register(keys, args)
  local assistant, worker, live = args[1], args[2], tonumber(args[3])
  if not assistant or #assistant < 1 or #assistant > 128 or string.find(assistant, '[%c%s]') then
    fail('assistant must be 1 to 128 printable characters, no spaces')
  end
  if not worker or #worker < 1 or #worker > 200 then fail('worker name must be 1 to 200 bytes') end
  if not live or live < 1 then fail('live ms must be a positive number') end
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', now)
  redis.call('ZADD', keys[1], now + live, worker)
  redis.call('PEXPIRE', keys[1], live * 4)
  redis.call('SADD', keys[2], assistant)
  return 1
end

local function has_live(key, now)
  return redis.call('ZCOUNT', key, '(' .. now, '+inf') > 0
end

-- Assistants with live workers (at most MAX_LIVE_LIST), for errors and routing.
local function live_assistants(now)
  local out = {}
  for _, a in ipairs(redis.call('SMEMBERS', '{tc:commands}:assistants')) do
    if a ~= '*' and has_live('{tc:commands}:w:' .. a, now) then
      out[#out + 1] = a
      if #out >= MAX_LIVE_LIST then break end
    end
  end
  table.sort(out)
  return out
end

local function submit(keys, args)
  local assistant = args[1]
  if not args[7] then fail('usage: FCALL threadcast_submit 4 <keys> <assistant> <thread> <method> <params> <corr> <reply> <deadline>') end
  local now = now_ms()
  local stream
  if assistant ~= '' and has_live(keys[3], now) then
    stream = keys[4]
  elseif has_live(keys[2], now) then
    stream = keys[1]
  else
    local live = live_assistants(now)
    if assistant == '' and #live == 1 then
      stream = '{tc:commands}:a:' .. live[1]
    elseif assistant == '' then
      fail('no worker can take commands for this thread: it has not run yet and ' ..
           (#live == 0 and 'no worker is running' or ('several assistants are served (' .. table.concat(live, ', ') .. '); start a run first')))
    else
      fail('no worker serves assistant "' .. assistant .. '"' ..
           (#live == 0 and ' (no worker is running)' or (' (live: ' .. table.concat(live, ', ') .. ')')))
    end
  end
  redis.call('XADD', stream, 'MAXLEN', '~', COMMANDS_MAXLEN, '*', 'thread', args[2], 'method', args[3],
             'params', args[4], 'corr', args[5], 'reply', args[6], 'deadline', args[7])
  return stream
end

redis.register_function('threadcast_append', guarded(append))
redis.register_function('threadcast_append_batch', guarded(append_batch))
redis.register_function('threadcast_register', guarded(register))
redis.register_function('threadcast_submit', guarded(submit))

-- ==== shared by threadcast_store and threadcast_rest: HTTP answers, JSON text, time ====

local HTTP_FAIL = 'threadcast-http:'

-- An HTTP error reply (status, {"detail": msg}), carried out of nested calls
-- by error() as a string.
local function http(status, msg)
  error(HTTP_FAIL .. status .. ':' .. msg, 0)
end

-- A member that is not there (nil, or JSON null).
local function absent(v) return v == nil or v == cjson.null end

-- handler(...)'s {status, body[, extra]}, or the {status, {"detail"}} an
-- http() in it gave; anything else it raised is a Redis error (a bug).
local function answered(handler, ...)
  local ok, res = pcall(handler, ...)
  if ok then return res end
  if type(res) == 'string' and string.sub(res, 1, #HTTP_FAIL) == HTTP_FAIL then
    local status, msg = string.match(string.sub(res, #HTTP_FAIL + 1), '^(%d+):(.*)$')
    return { tonumber(status), cjson.encode({ detail = msg }) }
  end
  error(res, 0)
end

-- ms since the epoch as ISO-8601 UTC with milliseconds (Redis' Lua has no os.date).
local function iso(ms)
  ms = math.floor(tonumber(ms) or 0)
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local rem = s - days * 86400
  -- days since 1970-01-01 to a civil date (the proleptic Gregorian calendar)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(rem / 3600),
                       math.floor(rem % 3600 / 60), rem % 60, ms - s * 1000)
end

-- The end of the JSON value that starts at i, in a text cjson has accepted.
local function value_end(s, i)
  local c = string.byte(s, i)
  if c == 34 then -- a string
    local j = i + 1
    while true do
      local q = string.find(s, '["\\]', j)
      if string.byte(s, q) == 92 then j = q + 2 else return q end
    end
  elseif c == 123 or c == 91 then -- an object or an array
    local depth, j = 0, i
    while true do
      local q = string.find(s, '["{}%[%]]', j)
      local b = string.byte(s, q)
      if b == 34 then
        q = value_end(s, q)
      elseif b == 123 or b == 91 then
        depth = depth + 1
      else
        depth = depth - 1
        if depth == 0 then return q end
      end
      j = q + 1
    end
  end
  local _, e = string.find(s, '^[^,}%]%s]+', i) -- a number, true, false or null
  return e
end

-- The members of a JSON object text cjson has accepted: name -> the value's
-- own text, and the names in order.
local function members(s)
  local out, order = {}, {}
  local i = string.find(s, '{', 1, true) + 1
  while true do
    i = string.find(s, '[^%s,]', i)
    if string.byte(s, i) == 125 then break end -- '}'
    local ke = value_end(s, i)
    local key = string.sub(s, i + 1, ke - 1)
    if string.find(key, '\\', 1, true) then key = cjson.decode(string.sub(s, i, ke)) end
    local vs = string.find(s, '[^%s:]', ke + 1)
    local ve = value_end(s, vs)
    if out[key] == nil then order[#order + 1] = key end
    out[key] = string.sub(s, vs, ve)
    i = ve + 1
  end
  return out, order
end

-- ==== threadcast_store: the Agent Protocol store (/store/*) ============================
--
--   FCALL threadcast_store 1 {tc:store} <op> <args-json>   -> {status, body-json}
--
-- The gateway turns each /store request into one call: op is store.put,
-- store.get, store.delete, store.search or store.namespaces; args-json is
-- {"query": {...strings...}, "body": <parsed JSON body or null>, "now": ms?}.
-- The reply is an HTTP status and a JSON body ("" for 204); bad input is a
-- 422 {"detail": "..."} naming the field. protocol/README.md ("The store:
-- records in Redis") documents every key. All keys carry the hash tag
-- {tc:store}, so the store is one Cluster slot and every call is atomic.
--
-- An item is a hash under {tc:store}:i:<member>, member = <encoded
-- namespace> "\n" <key> (the encoding escapes control characters, so the
-- first newline ends the namespace). The value is kept as the JSON text the
-- client sent, never re-encoded. {tc:store}:items (all scores 0) orders the
-- members bytewise, so a namespace prefix is a ZRANGEBYLEX range;
-- {tc:store}:ns holds the encoded namespaces that have items, with their
-- item counts in {tc:store}:nscount; {tc:store}:expiry scores members by
-- expiry (ms). An item with a TTL also expires in Redis (PEXPIREAT), and
-- every call first removes up to STORE_SWEEP expired members from the
-- indexes.

local STORE_TAG = '{tc:store}'
local ST_ITEM = '{tc:store}:i:'
local ST_ITEMS = '{tc:store}:items'
local ST_NS = '{tc:store}:ns'
local ST_NSCOUNT = '{tc:store}:nscount'
local ST_EXPIRY = '{tc:store}:expiry'
local STORE_MAX_VALUE = 1048576
local STORE_MAX_LABELS = 32
local STORE_MAX_LABEL = 256
local STORE_MAX_KEY = 1024
local STORE_MAX_LIMIT = 1000
local STORE_MAX_SCAN = 10000
local STORE_MAX_TTL = 5256000 -- minutes: ten years
local STORE_SWEEP = 200
local STORE_CHUNK = 256

local function invalid(msg) http(422, msg) end

local function decode_ns(enc)
  local ns = {}
  for seg in string.gmatch(enc, '/([^/]*)') do
    ns[#ns + 1] = string.gsub(seg, '%%(%x%x)', function(h) return string.char(tonumber(h, 16)) end)
  end
  return ns
end

-- Validates a namespace's labels ("*" is an ordinary label here); field
-- names it in errors, label i as field[i-1].
local function check_labels(ns, field, min_labels)
  if not is_array_of_strings(ns) then invalid(field .. ' must be an array of strings') end
  if #ns < min_labels then invalid(field .. ' must have at least one label') end
  if #ns > STORE_MAX_LABELS then
    invalid(field .. ' has ' .. #ns .. ' labels; the limit is ' .. STORE_MAX_LABELS)
  end
  for i, label in ipairs(ns) do
    local name = field .. '[' .. (i - 1) .. ']'
    if label == '' then invalid(name .. ' is empty: namespace labels cannot be empty') end
    if #label > STORE_MAX_LABEL then
      invalid(name .. ' is ' .. #label .. ' bytes; the limit is ' .. STORE_MAX_LABEL)
    end
    if string.find(label, '.', 1, true) then
      invalid(name .. ' ("' .. label .. '") contains a period: namespace labels cannot contain periods')
    end
  end
  return ns
end

local function check_key(key, field)
  if type(key) ~= 'string' then invalid(field .. ' must be a string') end
  if key == '' then invalid(field .. ' must not be empty') end
  if #key > STORE_MAX_KEY then invalid(field .. ' is ' .. #key .. ' bytes; the limit is ' .. STORE_MAX_KEY) end
  return key
end

-- JSON null and absence are alike for optional fields.

local function check_int(v, field, default, min, max)
  if absent(v) then return default end
  if type(v) ~= 'number' or v ~= math.floor(v) or not (v >= min and v <= (max or math.huge)) then
    invalid(field .. ' must be an integer ' .. (max and ('from ' .. min .. ' to ' .. max) or ('>= ' .. min)))
  end
  return v
end

local function check_bool(v, field)
  if absent(v) then return true end
  if type(v) ~= 'boolean' then invalid(field .. ' must be true, false or null') end
  return v
end

local function is_json_object(v)
  if type(v) ~= 'table' then return false end
  for k in pairs(v) do if type(k) ~= 'string' then return false end end
  return true
end

-- Filters: each member of `filter` names a top-level field of the item's
-- value and gives either a value (deep equality) or an object of operators.
local FILTER_OPS = { ['$eq'] = true, ['$ne'] = true, ['$gt'] = true, ['$gte'] = true,
                     ['$lt'] = true, ['$lte'] = true, ['$in'] = true, ['$nin'] = true }

local function json_equal(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not json_equal(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- An object whose members all start with "$" is a set of operators.
local function is_operators(cond)
  if type(cond) ~= 'table' or next(cond) == nil then return false end
  for k in pairs(cond) do
    if type(k) ~= 'string' or string.sub(k, 1, 1) ~= '$' then return false end
  end
  return true
end

local function check_filter(filter)
  if absent(filter) then return nil end
  if not is_json_object(filter) then invalid('filter must be a JSON object') end
  for field, cond in pairs(filter) do
    if is_operators(cond) then
      for op, arg in pairs(cond) do
        if not FILTER_OPS[op] then
          invalid('filter.' .. field .. ': unknown operator ' .. op ..
                  ' (expected $eq, $ne, $gt, $gte, $lt, $lte, $in or $nin)')
        end
        if (op == '$in' or op == '$nin') and (type(arg) ~= 'table' or is_json_object(arg) and next(arg) ~= nil) then
          invalid('filter.' .. field .. '.' .. op .. ' must be an array')
        end
      end
    end
  end
  return filter
end

local function ordered(a, b)
  return (type(a) == 'number' and type(b) == 'number') or (type(a) == 'string' and type(b) == 'string')
end

local function condition_holds(v, cond)
  if not is_operators(cond) then return json_equal(v, cond) end
  for op, arg in pairs(cond) do
    local ok
    if op == '$eq' then ok = json_equal(v, arg)
    elseif op == '$ne' then ok = not json_equal(v, arg)
    elseif op == '$gt' then ok = ordered(v, arg) and v > arg
    elseif op == '$gte' then ok = ordered(v, arg) and v >= arg
    elseif op == '$lt' then ok = ordered(v, arg) and v < arg
    elseif op == '$lte' then ok = ordered(v, arg) and v <= arg
    else -- $in, $nin
      ok = false
      for _, x in ipairs(arg) do if json_equal(v, x) then ok = true; break end end
      if op == '$nin' then ok = not ok end
    end
    if not ok then return false end
  end
  return true
end

local function filter_holds(filter, value_json)
  local ok, value = pcall(cjson.decode, value_json)
  if not ok or type(value) ~= 'table' then return false end
  for field, cond in pairs(filter) do
    if not condition_holds(value[field], cond) then return false end
  end
  return true
end

-- Takes member out of every index (and its hash).
local function store_remove(member)
  redis.call('DEL', ST_ITEM .. member)
  redis.call('ZREM', ST_EXPIRY, member)
  if redis.call('ZREM', ST_ITEMS, member) == 1 then
    local enc = string.match(member, '^([^\n]*)\n')
    if redis.call('HINCRBY', ST_NSCOUNT, enc, -1) <= 0 then
      redis.call('HDEL', ST_NSCOUNT, enc)
      redis.call('ZREM', ST_NS, enc)
    end
  end
end

local function store_sweep(now)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', ST_EXPIRY, '-inf', now, 'LIMIT', 0, STORE_SWEEP)) do
    store_remove(member)
  end
end

local ITEM_FIELDS = { 'namespace', 'key', 'value', 'created_at', 'updated_at', 'ttl', 'expires_at' }

-- The item's fields (as ITEM_FIELDS), or nil when it is absent or expired
-- (then it leaves the indexes, if it was still in them).
local function store_load(member, now)
  local h = redis.call('HMGET', ST_ITEM .. member, unpack(ITEM_FIELDS))
  if not h[1] or h[7] and tonumber(h[7]) <= now then
    store_remove(member)
    return nil
  end
  return h
end

local function ttl_ms(ttl)
  return math.max(1, math.floor(ttl * 60000 + 0.5))
end

local function set_expiry(member, at)
  redis.call('HSET', ST_ITEM .. member, 'expires_at', at)
  redis.call('PEXPIREAT', ST_ITEM .. member, at)
  redis.call('ZADD', ST_EXPIRY, at, member)
end

-- Serves a read: the item's JSON, its TTL refreshed when asked.
local function item_json(member, h, now, refresh)
  if refresh and h[6] then set_expiry(member, now + ttl_ms(tonumber(h[6]))) end
  return '{"namespace":' .. h[1] .. ',"key":' .. cjson.encode(h[2]) .. ',"value":' .. h[3] ..
         ',"created_at":"' .. iso(tonumber(h[4])) .. '","updated_at":"' .. iso(tonumber(h[5])) .. '"}'
end

local function body_object(a)
  if not is_json_object(a.body) then invalid('body must be a JSON object') end
  return a.body
end

local function store_put(a, raw, now)
  local body = body_object(a)
  local ns = check_labels(body.namespace, 'namespace', 1)
  local key = check_key(body.key, 'key')
  -- The value's own text, found in the call's JSON: body.value.
  local value
  if type(body.value) == 'table' then
    value = members(members(raw).body).value
  end
  if not value or string.sub(value, 1, 1) ~= '{' then invalid('value must be a JSON object') end
  if #value > STORE_MAX_VALUE then
    invalid('value is ' .. #value .. ' bytes of JSON; the limit is ' .. STORE_MAX_VALUE)
  end
  local index = body.index
  if not absent(index) and index ~= false and not is_array_of_strings(index) then
    invalid('index must be false, null or an array of field paths')
  end
  local ttl = body.ttl
  if not absent(ttl) and (type(ttl) ~= 'number' or not (ttl > 0 and ttl <= STORE_MAX_TTL)) then
    invalid('ttl must be a number of minutes greater than 0 and at most ' .. STORE_MAX_TTL .. ', or null')
  end
  store_sweep(now)
  local enc = encode_ns(ns)
  local member = enc .. '\n' .. key
  local hk = ST_ITEM .. member
  local old = redis.call('HMGET', hk, 'created_at', 'expires_at')
  local created = old[1]
  if old[2] and tonumber(old[2]) <= now then created = nil end
  redis.call('HSET', hk, 'namespace', cjson.encode(ns), 'key', key, 'value', value,
             'created_at', created or now, 'updated_at', now)
  if not absent(ttl) then
    redis.call('HSET', hk, 'ttl', ttl)
    set_expiry(member, now + ttl_ms(ttl))
  else
    redis.call('HDEL', hk, 'ttl', 'expires_at')
    redis.call('PERSIST', hk)
    redis.call('ZREM', ST_EXPIRY, member)
  end
  if redis.call('ZADD', ST_ITEMS, 0, member) == 1 then
    redis.call('HINCRBY', ST_NSCOUNT, enc, 1)
    redis.call('ZADD', ST_NS, 0, enc)
  end
  return { 204, '' }
end

-- A query-string parameter: a string given once.
local function query_param(q, name, required)
  local v = q[name]
  if v == nil then
    if required then invalid('query parameter ' .. name .. ' is required') end
    return nil
  end
  if type(v) ~= 'string' then invalid('query parameter ' .. name .. ' must be given once') end
  return v
end

local QUERY_BOOLS = { ['true'] = true, ['1'] = true, yes = true, ['false'] = false, ['0'] = false, no = false }

local function store_get(a, _, now)
  local q = type(a.query) == 'table' and a.query or {}
  local nstext = query_param(q, 'namespace', true)
  local key = check_key(query_param(q, 'key', true), 'query parameter key')
  local refresh = true
  local r = query_param(q, 'refresh_ttl', false)
  if r then
    refresh = QUERY_BOOLS[string.lower(r)]
    if refresh == nil then invalid('query parameter refresh_ttl must be true or false') end
  end
  local ns, from = {}, 1
  if nstext == '' then invalid('query parameter namespace must have at least one label') end
  while true do
    local dot = string.find(nstext, '.', from, true)
    ns[#ns + 1] = string.sub(nstext, from, dot and dot - 1)
    if not dot then break end
    from = dot + 1
  end
  check_labels(ns, 'query parameter namespace', 1)
  store_sweep(now)
  local member = encode_ns(ns) .. '\n' .. key
  local h = store_load(member, now)
  if not h then
    http(404, 'no item with key ' .. cjson.encode(key) .. ' in namespace ' .. cjson.encode(ns))
  end
  return { 200, item_json(member, h, now, refresh) }
end

local function store_delete(a, _, now)
  local body = body_object(a)
  local ns = check_labels(body.namespace, 'namespace', 1)
  local key = check_key(body.key, 'key')
  store_sweep(now)
  store_remove(encode_ns(ns) .. '\n' .. key)
  return { 204, '' }
end

-- Calls visit(member) for the members of index in [min, max) in byte
-- order, STORE_CHUNK at a time, until it returns true or `budget`
-- members were visited. Returns what is left of the budget. Members may be
-- removed as they are visited: each chunk starts after the last one seen.
local function scan_lex(index, min, max, budget, visit)
  while budget > 0 do
    local chunk = redis.call('ZRANGEBYLEX', index, min, max, 'LIMIT', 0, math.min(STORE_CHUNK, budget))
    for _, member in ipairs(chunk) do
      budget = budget - 1
      if visit(member) then return 0 end
    end
    if #chunk < STORE_CHUNK then break end
    min = '(' .. chunk[#chunk]
  end
  return budget
end

-- The lexicographic ranges of the members under a namespace: its own
-- (encoding .. "\n") and its descendants' (encoding .. "/"), in byte order.
local function prefix_ranges(enc)
  if enc == '' then return { { '-', '+' } } end
  return { { '[' .. enc .. '\n', '(' .. enc .. '\v' }, { '[' .. enc .. '/', '(' .. enc .. '0' } }
end

local function store_search(a, _, now)
  local body = body_object(a)
  local prefix = body.namespace_prefix
  if absent(prefix) then prefix = {} end
  check_labels(prefix, 'namespace_prefix', 0)
  local filter = check_filter(body.filter)
  local limit = check_int(body.limit, 'limit', 10, 1, STORE_MAX_LIMIT)
  local offset = check_int(body.offset, 'offset', 0, 0)
  if not absent(body.query) and type(body.query) ~= 'string' then invalid('query must be a string or null') end
  local refresh = check_bool(body.refresh_ttl, 'refresh_ttl')
  store_sweep(now)
  local out, matched, budget = {}, 0, STORE_MAX_SCAN
  local function visit(member)
    local h = store_load(member, now)
    if h and (not filter or filter_holds(filter, h[3])) then
      matched = matched + 1
      if matched > offset then out[#out + 1] = item_json(member, h, now, refresh) end
    end
    return #out >= limit
  end
  for _, range in ipairs(prefix_ranges(encode_ns(prefix))) do
    if #out >= limit then break end
    budget = scan_lex(ST_ITEMS, range[1], range[2], budget, visit)
  end
  return { 200, '{"items":[' .. table.concat(out, ',') .. ']}' }
end

local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- Does ns match pattern at its start (or, with at_end, at its end)? "*" in
-- the pattern matches any one label.
local function ns_matches(ns, pattern, at_end)
  if #pattern > #ns then return false end
  local shift = at_end and #ns - #pattern or 0
  for i, p in ipairs(pattern) do
    if p ~= '*' and ns[i + shift] ~= p then return false end
  end
  return true
end

local function store_namespaces(a, _, now)
  local body = body_object(a)
  local prefix, suffix = body.prefix, body.suffix
  prefix = not absent(prefix) and check_labels(prefix, 'prefix', 0) or {}
  suffix = not absent(suffix) and check_labels(suffix, 'suffix', 0) or {}
  local max_depth = check_int(body.max_depth, 'max_depth', nil, 1)
  local limit = check_int(body.limit, 'limit', 100, 1, STORE_MAX_LIMIT)
  local offset = check_int(body.offset, 'offset', 0, 0)
  store_sweep(now)
  -- The range is chosen by the labels before the first wildcard.
  local fixed = {}
  for _, label in ipairs(prefix) do
    if label == '*' then break end
    fixed[#fixed + 1] = label
  end
  local enc = encode_ns(fixed)
  local found, seen = {}, {}
  local function visit(member)
    local ns = decode_ns(member)
    if ns_matches(ns, prefix, false) and ns_matches(ns, suffix, true) then
      if max_depth and #ns > max_depth then
        for i = #ns, max_depth + 1, -1 do ns[i] = nil end
      end
      local k = encode_ns(ns)
      if not seen[k] then
        seen[k] = ns
        found[#found + 1] = k
      end
    end
  end
  local budget = STORE_MAX_SCAN
  if enc == '' then
    scan_lex(ST_NS, '-', '+', budget, visit)
  else
    if redis.call('ZSCORE', ST_NS, enc) then
      visit(enc)
      budget = budget - 1
    end
    scan_lex(ST_NS, '[' .. enc .. '/', '(' .. enc .. '0', budget, visit)
  end
  -- The scan visits namespaces in the byte order of their encodings (a
  -- namespace before its descendants), as search does; cutting them to
  -- max_depth can break that order (/a-b, /a/c -> /a-b, /a), so then
  -- they are sorted again, by bytes (Lua's < would follow Redis' locale).
  if max_depth then table.sort(found, bytes_less) end
  local out = {}
  for i = offset + 1, math.min(#found, offset + limit) do out[#out + 1] = cjson.encode(seen[found[i]]) end
  return { 200, '{"namespaces":[' .. table.concat(out, ',') .. ']}' }
end

local STORE_OPS = { ['store.put'] = store_put, ['store.get'] = store_get, ['store.delete'] = store_delete,
                    ['store.search'] = store_search, ['store.namespaces'] = store_namespaces }

local function store_call(keys, args)
  if keys[1] ~= STORE_TAG then fail('threadcast_store takes the one key ' .. STORE_TAG) end
  local op = STORE_OPS[args[1] or '']
  if not op then
    fail('unknown store op "' .. tostring(args[1]) .. '" (expected store.put, store.get, store.delete, ' ..
         'store.search or store.namespaces); usage: FCALL threadcast_store 1 {tc:store} <op> <args-json>')
  end
  local raw = args[2] or ''
  local ok, a = pcall(cjson.decode, raw)
  if not ok or not is_json_object(a) then fail('args must be a JSON object') end
  local now = a.now
  if type(now) == 'number' and now >= 0 then now = math.floor(now) else now = now_ms() end
  return answered(op, a, raw, now)
end

redis.register_function('threadcast_store', guarded(store_call))
-- ==== end of threadcast_store ==========================================================

-- ==== the Agent Protocol REST API: threads, runs, assistants ============================
--
--   FCALL threadcast_rest 1 {tc:commands} <op> <args-json>
--     -> {status, body-json[, extra-json]}
--
-- The gateway turns each REST request into one call (args-json is
-- {path, query, body, ids, after_seq, stateless, now}); the worker reports
-- its runs through run.started and run.finished. Every record lives in the
-- slot of {tc:commands}, with the command streams, so a run is created,
-- queued and handed to a worker in one atomic step. Client mistakes are
-- replies ({4xx, {"detail": …}}); a malformed call from the gateway is an
-- error (ERR threadcast: …). protocol/README.md ("The Agent Protocol REST
-- API: records in Redis") documents every op, key and field.
--
-- Bodies are decoded with cjson to be checked, but what is only passed on
-- (a run's input, config, …, a thread's values) is copied as the JSON text
-- the caller sent: cjson cannot tell [] from {} and keeps 14 digits of a
-- number, so re-encoding would change them.

local K = '{tc:commands}'
local MAX_LIMIT = 1000
local MAX_EXAMINE = 10000
local MAX_IDS = 1000
local MAX_QUEUE = 100
local MAX_RUNS = 1000
local MAX_AFTER_SECONDS = 86400
local ID_PATTERN = '^[%w%._:%-]+$'
local TERMINAL = { success = true, error = true, timeout = true, interrupted = true }
local THREAD_STATUSES = { idle = true, busy = true, interrupted = true, error = true }
local RUN_STATUSES = { pending = true, running = true, success = true, error = true, timeout = true,
                       interrupted = true }
local STRATEGIES = { reject = true, interrupt = true, rollback = true, enqueue = true }
local STREAM_MODES = { values = true, messages = true, ['messages-tuple'] = true, updates = true,
                       events = true, debug = true, custom = true, tasks = true, checkpoints = true }

-- A Lua string as a JSON string (cjson is not there while the library loads).
local function jstr(s) return cjson.encode(s) end

local function tkey(tid) return K .. ':t:' .. tid end
local function rkey(rid) return K .. ':r:' .. rid end

-- Object text from names (in order) and their values' texts.
local function object(order, vals)
  local parts = {}
  for _, k in ipairs(order) do
    if vals[k] ~= nil then parts[#parts + 1] = jstr(k) .. ':' .. vals[k] end
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- Object text a with b's members laid over it (the top-level merge of PATCH).
local function merge(a, b)
  local av, ao = members(a)
  local bv, bo = members(b)
  for _, k in ipairs(bo) do
    if av[k] == nil then ao[#ao + 1] = k end
    av[k] = bv[k]
  end
  return object(ao, av)
end

-- Whether every member of filter is in record with an equal value (objects
-- and arrays compared the same way, member by member); null matches nothing.
local function contains(record, filter)
  if type(record) ~= 'table' then return false end
  for k, v in pairs(filter) do
    local r = record[k]
    if r == nil or r == cjson.null or v == cjson.null then return false end
    if type(v) == 'table' then
      if not contains(r, v) then return false end
    elseif r ~= v then
      return false
    end
  end
  return true
end

-- An object, as cjson decoded it (an empty array looks the same: where it
-- matters, the text is checked too).
local function is_object(v) return type(v) == 'table' and v[1] == nil end
local function is_object_text(s) return type(s) == 'string' and string.byte(s, 1) == 123 end

local is_strings = is_array_of_strings

local function is_int(v, lo, hi)
  return type(v) == 'number' and v == math.floor(v) and v >= lo and v <= hi
end

-- One request's view: decoded args, the texts of the body's members, the clock.
local function request(raw)
  local ok, a = pcall(cjson.decode, raw)
  if not ok or type(a) ~= 'table' then fail('args must be a JSON object') end
  local am = members(raw)
  local c = { a = a, path = is_object(a.path) and a.path or {}, query = is_object(a.query) and a.query or {},
              ids = is_object(a.ids) and a.ids or {}, rawargs = am }
  if is_object(a.body) and is_object_text(am.body) then
    c.body, c.raw = a.body, members(am.body)
  elseif absent(a.body) then
    c.body, c.raw = {}, {}
    c.nobody = true
  else
    c.body = a.body -- not an object: each op says what it wanted
  end
  -- c.now stamps records (a.now, when the gateway gives one); workers'
  -- liveness is always Redis' own clock, c.clock. Both are digit strings:
  -- Lua would write a number of more than 14 digits in exponent form.
  c.clock = now_ms()
  if a.now ~= nil then
    if not is_int(a.now, 0, 1e15) then fail('args.now must be ms since the epoch') end
    c.now = string.format('%d', a.now)
  else
    c.now = string.format('%d', c.clock)
  end
  return c
end

local function body_object(c)
  if type(c.body) ~= 'table' or c.raw == nil then http(422, 'the request body must be a JSON object') end
end

-- A query parameter given at most once, as a string, or nil.
local function query1(c, name)
  local v = c.query[name]
  if absent(v) then return nil end
  if type(v) == 'table' then http(422, 'query parameter ' .. name .. ' must be given once') end
  return tostring(v)
end

local function query_int(c, name, default, lo, hi)
  local v = query1(c, name)
  if v == nil then return default end
  local n = string.match(v, '^%d+$') and tonumber(v)
  if not n or n < lo or n > hi then
    http(422, 'query parameter ' .. name .. ' must be an integer from ' .. lo .. ' to ' .. hi)
  end
  return n
end

local function path_id(c, name)
  local v = c.path[name]
  if type(v) ~= 'string' or v == '' then fail('args.path.' .. name .. ' is required') end
  return v
end

local function fresh_id(c, name)
  local v = c.ids[name]
  if type(v) ~= 'string' or not string.match(v, ID_PATTERN) or #v > 128 then
    fail('args.ids.' .. name .. ' must be a fresh id')
  end
  return v
end

local function check_metadata(c, field)
  local v = c.body[field]
  if absent(v) then return nil end
  if not is_object(v) or not is_object_text(c.raw[field]) then http(422, field .. ' must be an object') end
  return c.raw[field]
end

-- ttl: minutes, or {ttl: minutes, strategy: "delete"} as the SDK sends it.
local function check_ttl(c)
  local v = c.body.ttl
  if absent(v) then return nil end
  if is_object(v) then
    if not absent(v.strategy) and v.strategy ~= 'delete' then http(422, 'ttl.strategy must be "delete"') end
    v = v.ttl
    if type(v) ~= 'number' or v <= 0 or v > 5256000 then http(422, 'ttl.ttl must be a number of minutes above 0 and at most 5256000 (10 years)') end
  elseif type(v) ~= 'number' or v <= 0 or v > 5256000 then
    http(422, 'ttl must be a number of minutes above 0 and at most 5256000 (10 years), or {"ttl": minutes, "strategy": "delete"}')
  end
  return v
end

-- A record as a table (field -> string), or nil; ids longer than any we make have none.
local function record(id, key)
  if #id > 128 then return nil end
  local f = redis.call('HGETALL', key(id))
  if #f == 0 then return nil end
  local t = {}
  for i = 1, #f, 2 do t[f[i]] = f[i + 1] end
  return t
end
local function thread_record(tid) return record(tid, tkey) end
local function run_record(rid) return record(rid, rkey) end

local function thread_or_404(tid)
  local t = thread_record(tid)
  if not t then http(404, 'thread "' .. tid .. '" not found') end
  return t
end

-- The run, which must be the thread's.
local function run_or_404(tid, rid)
  local r = run_record(rid)
  if not r or r.thread_id ~= tid then http(404, 'run "' .. rid .. '" not found on thread "' .. tid .. '"') end
  return r
end

local function thread_json(t)
  local parts = {
    '{"thread_id":', jstr(t.thread_id),
    ',"created_at":', jstr(iso(t.created_at)),
    ',"updated_at":', jstr(iso(t.updated_at)),
    ',"state_updated_at":', jstr(iso(t.state_updated_at or t.updated_at)),
    ',"metadata":', t.metadata or '{}',
    ',"status":', jstr(t.status or 'idle'),
    ',"values":', t.values or '{}',
    ',"interrupts":', t.interrupts or '{}',
    ',"config":', t.config or '{}',
  }
  if t.error then parts[#parts + 1] = ',"error":' .. t.error end
  parts[#parts + 1] = '}'
  return table.concat(parts)
end

local function run_json(r)
  return table.concat({
    '{"run_id":', jstr(r.run_id),
    ',"thread_id":', jstr(r.thread_id),
    ',"assistant_id":', jstr(r.assistant_id),
    ',"created_at":', jstr(iso(r.created_at)),
    ',"updated_at":', jstr(iso(r.updated_at)),
    ',"status":', jstr(r.status),
    ',"metadata":', r.metadata or '{}',
    ',"kwargs":', r.kwargs or '{}',
    ',"multitask_strategy":', jstr(r.multitask_strategy or 'reject'),
    '}' })
end

-- A thread with a TTL takes its runs, queue and active run with it.
local function apply_ttl(tid, t)
  local at = tonumber(t.expires_at)
  if not at then return end
  local tk = tkey(tid)
  for _, k in ipairs({ tk, tk .. ':runs', tk .. ':queue', tk .. ':active' }) do
    redis.call('PEXPIREAT', k, at)
  end
end

-- The stream a run of assistant a goes to: its workers', else the wildcard
-- workers', else nil (nobody serves it).
local function route(a, now)
  if has_live(K .. ':w:' .. a, now) then return K .. ':a:' .. a end
  if has_live(K .. ':w:*', now) then return 'tc:commands' end
  return nil
end

local function xadd_command(stream, tid, method, params, corr)
  redis.call('XADD', stream, 'MAXLEN', '~', COMMANDS_MAXLEN, '*', 'thread', tid, 'method', method,
             'params', params, 'corr', corr, 'reply', '', 'deadline', '0')
end

-- Hands run r to a worker (a rest.run entry) and makes it the thread's active run.
local function dispatch(r, now)
  -- A queued run whose workers have gone waits on its assistant's stream
  -- (the consumer group keeps it for the next worker that serves it).
  local stream = route(r.assistant_id, now) or (K .. ':a:' .. r.assistant_id)
  local kw = r.kwargs or '{}'
  local inner = string.sub(kw, 2, -2)
  local params = table.concat({
    '{"run_id":', jstr(r.run_id), ',"thread_id":', jstr(r.thread_id),
    ',"assistant_id":', jstr(r.assistant_id), ',"metadata":', r.metadata or '{}',
    ',"on_completion":', jstr(r.on_completion or 'keep'),
    ',"temporary":', r.temporary == '1' and 'true' or 'false',
    ',"after_seconds":', r.after_seconds or '0',
    inner ~= '' and ',' or '', inner, '}' })
  xadd_command(stream, r.thread_id, 'rest.run', params, r.run_id)
  redis.call('HSET', rkey(r.run_id), 'stream', stream)
  redis.call('SET', tkey(r.thread_id) .. ':active', r.run_id)
  r.stream = stream
  return stream
end

-- Asks the worker running r to stop it (a rest.cancel entry).
local function send_cancel(r, action)
  local stream = r.stream or route(r.assistant_id, now_ms()) or (K .. ':a:' .. r.assistant_id)
  xadd_command(stream, r.thread_id, 'rest.cancel',
               '{"run_id":' .. jstr(r.run_id) .. ',"thread_id":' .. jstr(r.thread_id) .. ',"action":' .. jstr(action) .. '}',
               r.run_id)
  redis.call('HSET', rkey(r.run_id), 'cancel', action)
end

local function delete_run(tid, rid)
  redis.call('DEL', rkey(rid))
  redis.call('ZREM', tkey(tid) .. ':runs', rid)
  redis.call('LREM', tkey(tid) .. ':queue', 0, rid)
end

-- Every record of a thread: the thread, its runs, queue and active marker.
local function delete_thread(tid)
  local tk = tkey(tid)
  local rids = redis.call('ZRANGE', tk .. ':runs', 0, -1)
  for _, rid in ipairs(rids) do redis.call('DEL', rkey(rid)) end
  redis.call('DEL', tk, tk .. ':runs', tk .. ':queue', tk .. ':active')
  redis.call('ZREM', K .. ':threads', tid)
end

-- The thread's active run, when it still is one (a stale marker is cleared).
local function active_run(tid)
  local rid = redis.call('GET', tkey(tid) .. ':active')
  if not rid then return nil end
  local r = run_record(rid)
  if r and not TERMINAL[r.status] then return r end
  redis.call('DEL', tkey(tid) .. ':active')
  return nil
end

-- Dispatches the first queued run that is still pending; returns it or nil.
local function dispatch_next(tid, now)
  for _ = 1, MAX_QUEUE + 1 do
    local rid = redis.call('LPOP', tkey(tid) .. ':queue')
    if not rid then return nil end
    local r = run_record(rid)
    if r and r.status == 'pending' then
      dispatch(r, now)
      return r
    end
  end
  return nil
end

local function new_thread(tid, now, metadata, ttl)
  local t = { thread_id = tid, created_at = tostring(now), updated_at = tostring(now), metadata = metadata or '{}',
              status = 'idle', interrupts = '{}', config = '{}' }
  redis.call('HSET', tkey(tid), 'thread_id', tid, 'created_at', now, 'updated_at', now, 'metadata', t.metadata,
             'status', 'idle', 'interrupts', '{}', 'config', '{}')
  if ttl then
    t.expires_at = string.format('%d', now + ttl * 60000)
    redis.call('HSET', tkey(tid), 'expires_at', t.expires_at)
    apply_ttl(tid, t)
  end
  redis.call('ZADD', K .. ':threads', now, tid)
  return t
end

-- ---- threads --------------------------------------------------------------------------

local function threads_create(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local tid = b.thread_id
  if absent(tid) then
    tid = fresh_id(c, 'thread_id')
  elseif type(tid) ~= 'string' or #tid > 128 or not string.match(tid, ID_PATTERN) then
    http(422, 'thread_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -')
  end
  local metadata = check_metadata(c, 'metadata')
  local if_exists = b.if_exists
  if absent(if_exists) then if_exists = 'raise' end
  if if_exists ~= 'raise' and if_exists ~= 'do_nothing' then http(422, 'if_exists must be "raise" or "do_nothing"') end
  local ttl = check_ttl(c)
  if not absent(b.supersteps) and (type(b.supersteps) ~= 'table' or next(b.supersteps) ~= nil) then
    http(422, 'supersteps is not supported: create the thread, then update its state')
  end
  local t = thread_record(tid)
  if t then
    if if_exists == 'raise' then http(409, 'thread "' .. tid .. '" already exists') end
    return { 200, thread_json(t) }
  end
  return { 200, thread_json(new_thread(tid, c.now, metadata, ttl)) }
end

local function threads_get(c)
  return { 200, thread_json(thread_or_404(path_id(c, 'thread_id'))) }
end

local function threads_patch(c)
  local tid = path_id(c, 'thread_id')
  if not c.nobody then body_object(c) end
  local metadata = check_metadata(c, 'metadata')
  local ttl = check_ttl(c)
  local t = thread_or_404(tid)
  if metadata then
    t.metadata = merge(t.metadata or '{}', metadata)
    redis.call('HSET', tkey(tid), 'metadata', t.metadata)
  end
  t.updated_at = tostring(c.now)
  redis.call('HSET', tkey(tid), 'updated_at', c.now)
  if ttl then
    t.expires_at = string.format('%d', c.now + ttl * 60000)
    redis.call('HSET', tkey(tid), 'expires_at', t.expires_at)
    apply_ttl(tid, t)
    for _, rid in ipairs(redis.call('ZRANGE', tkey(tid) .. ':runs', 0, -1)) do
      redis.call('PEXPIREAT', rkey(rid), t.expires_at)
    end
  end
  return { 200, thread_json(t) }
end

local function threads_delete(c)
  local tid = path_id(c, 'thread_id')
  thread_or_404(tid)
  local cancel = {}
  local r = active_run(tid)
  if r then
    send_cancel(r, 'interrupt')
    cancel[1] = jstr(r.run_id)
  end
  delete_thread(tid)
  return { 204, '', '{"cancel":[' .. table.concat(cancel, ',') .. ']}' }
end

local THREAD_SORTS = { thread_id = true, status = true, created_at = true, updated_at = true }

-- A search body's limit (1 to MAX_LIMIT, default 10) and offset.
local function paging(b)
  local limit, offset = b.limit, b.offset
  if absent(limit) then limit = 10 elseif not is_int(limit, 1, MAX_LIMIT) then
    http(422, 'limit must be an integer from 1 to ' .. MAX_LIMIT)
  end
  if absent(offset) then offset = 0 elseif not is_int(offset, 0, MAX_EXAMINE) then
    http(422, 'offset must be an integer from 0 to ' .. MAX_EXAMINE)
  end
  return limit, offset
end

-- A search body's sort_by (default created_at) and sort_order (default desc).
local function sorting(b, allowed, names)
  local sort_by, order = b.sort_by, b.sort_order
  if absent(sort_by) then sort_by = 'created_at' elseif not allowed[sort_by] then
    http(422, 'sort_by must be ' .. names)
  end
  if absent(order) then order = 'desc' elseif order ~= 'asc' and order ~= 'desc' then
    http(422, 'sort_order must be "asc" or "desc"')
  end
  return sort_by, order
end

local function threads_search(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local mfilter, vfilter = b.metadata, b.values
  if not absent(mfilter) and not is_object(mfilter) then http(422, 'metadata must be an object') end
  if not absent(vfilter) and not is_object(vfilter) then http(422, 'values must be an object') end
  local status = b.status
  if absent(status) then status = nil elseif not THREAD_STATUSES[status] then
    http(422, 'status must be "idle", "busy", "interrupted" or "error"')
  end
  local limit, offset = paging(b)
  local sort_by, order = sorting(b, THREAD_SORTS, '"thread_id", "status", "created_at" or "updated_at"')
  if not absent(b.extract) then http(422, 'extract is not supported') end
  local ids = b.ids
  if not absent(ids) then
    if not is_strings(ids) then http(422, 'ids must be an array of strings') end
    if #ids > MAX_IDS then http(422, 'ids has ' .. #ids .. ' entries; at most ' .. MAX_IDS) end
  else
    ids = nil
  end

  -- Candidates: the ids asked for, else the newest (or oldest) MAX_EXAMINE
  -- threads; sorted by creation, the scan stops once the page is full.
  local by_created = sort_by == 'created_at' and not ids
  local candidates
  if ids then
    candidates = ids
  elseif order == 'asc' and by_created then
    candidates = redis.call('ZRANGE', K .. ':threads', 0, MAX_EXAMINE - 1)
  else
    candidates = redis.call('ZREVRANGE', K .. ':threads', 0, MAX_EXAMINE - 1)
  end
  local want = offset + limit
  local found = {}
  for _, tid in ipairs(candidates) do
    local t = thread_record(tid)
    if not t then
      if not ids then redis.call('ZREM', K .. ':threads', tid) end -- expired (TTL)
    elseif (not status or t.status == status)
        and (absent(mfilter) or contains(cjson.decode(t.metadata or '{}'), mfilter))
        and (absent(vfilter) or (t.values and contains(cjson.decode(t.values), vfilter))) then
      found[#found + 1] = t
      if by_created and #found >= want then break end
    end
  end
  if not by_created then
    local num = sort_by == 'created_at' or sort_by == 'updated_at'
    table.sort(found, function(x, y)
      local a, b2 = x[sort_by], y[sort_by]
      if num then a, b2 = tonumber(a), tonumber(b2) end
      if a == b2 then
        if order == 'asc' then return x.thread_id < y.thread_id end
        return x.thread_id > y.thread_id
      end
      if order == 'asc' then return a < b2 end
      return a > b2
    end)
  end
  local out = {}
  for i = offset + 1, math.min(#found, want) do out[#out + 1] = thread_json(found[i]) end
  return { 200, '[' .. table.concat(out, ',') .. ']' }
end

local function threads_copy(c)
  local tid = path_id(c, 'thread_id')
  local src = thread_or_404(tid)
  local nid = fresh_id(c, 'thread_id')
  if thread_record(nid) then http(409, 'thread "' .. nid .. '" already exists') end
  local t = new_thread(nid, c.now, src.metadata, nil)
  local f = { 'config', src.config or '{}', 'interrupts', src.interrupts or '{}' }
  t.config, t.interrupts = src.config, src.interrupts
  if src.values then
    t.values, t.state_updated_at = src.values, src.state_updated_at
    f[#f + 1], f[#f + 2] = 'values', src.values
    if src.state_updated_at then f[#f + 1], f[#f + 2] = 'state_updated_at', src.state_updated_at end
  end
  redis.call('HSET', tkey(nid), unpack(f))
  return { 200, thread_json(t) }
end

-- ---- runs -----------------------------------------------------------------------------

-- The body members a run keeps in kwargs, in this order, as sent.
local KWARGS = { 'input', 'command', 'config', 'context', 'stream_mode', 'stream_subgraphs', 'stream_resumable',
                 'interrupt_before', 'interrupt_after', 'checkpoint_id', 'checkpoint', 'checkpoint_during',
                 'durability', 'feedback_keys', 'webhook', 'on_disconnect' }

local function check_enum(b, field, allowed, default)
  local v = b[field]
  if absent(v) then return default end
  if type(v) ~= 'string' or not allowed[v] then
    local names = {}
    for k in pairs(allowed) do names[#names + 1] = '"' .. k .. '"' end
    table.sort(names)
    http(422, field .. ' must be one of ' .. table.concat(names, ', '))
  end
  return v
end

-- Checks a run's body; returns the run's fields (kwargs as JSON text).
local function run_body(c)
  body_object(c)
  local b, raw = c.body, c.raw
  local a = b.assistant_id
  if absent(a) then http(422, 'assistant_id is required') end
  if type(a) ~= 'string' or #a < 1 or #a > 128 or string.find(a, '[%c%s]') then
    http(422, 'assistant_id must be 1 to 128 printable characters, no spaces')
  end
  for _, f in ipairs({ 'command', 'config', 'context', 'checkpoint' }) do
    if not absent(b[f]) and not is_object_text(raw[f]) then http(422, f .. ' must be an object') end
  end
  local cfg = b.config
  if is_object(cfg) then
    if not absent(cfg.configurable) and not is_object(cfg.configurable) then http(422, 'config.configurable must be an object') end
    if not absent(cfg.tags) and not is_strings(cfg.tags) then http(422, 'config.tags must be an array of strings') end
    if not absent(cfg.recursion_limit) and not is_int(cfg.recursion_limit, 1, 1e9) then
      http(422, 'config.recursion_limit must be a positive integer')
    end
  end
  local metadata = check_metadata(c, 'metadata')
  local sm = b.stream_mode
  local stream_mode
  if absent(sm) then
    stream_mode = '["values"]'
  else
    if type(sm) == 'string' then sm = { sm } end
    if not is_strings(sm) or #sm == 0 then http(422, 'stream_mode must be a stream mode or a non-empty array of them') end
    local seen = {}
    for _, m in ipairs(sm) do
      if not STREAM_MODES[m] then
        http(422, 'stream_mode "' .. m .. '" is not one of values, messages, messages-tuple, updates, events, debug, custom, tasks, checkpoints')
      end
      seen[#seen + 1] = jstr(m)
    end
    stream_mode = '[' .. table.concat(seen, ',') .. ']'
  end
  for _, f in ipairs({ 'stream_subgraphs', 'stream_resumable', 'checkpoint_during' }) do
    if not absent(b[f]) and type(b[f]) ~= 'boolean' then http(422, f .. ' must be true or false') end
  end
  for _, f in ipairs({ 'interrupt_before', 'interrupt_after' }) do
    local v = b[f]
    if not absent(v) and v ~= '*' and not is_strings(v) then http(422, f .. ' must be "*" or an array of node names') end
  end
  for _, f in ipairs({ 'checkpoint_id', 'webhook' }) do
    if not absent(b[f]) and type(b[f]) ~= 'string' then http(422, f .. ' must be a string') end
  end
  if not absent(b.feedback_keys) and not is_strings(b.feedback_keys) then http(422, 'feedback_keys must be an array of strings') end
  if is_object(b.checkpoint) and not absent(b.checkpoint.checkpoint_id) and type(b.checkpoint.checkpoint_id) ~= 'string' then
    http(422, 'checkpoint.checkpoint_id must be a string')
  end
  check_enum(b, 'durability', { sync = true, async = true, exit = true })
  check_enum(b, 'on_disconnect', { cancel = true, continue = true })
  local r = {
    assistant_id = a,
    metadata = metadata or '{}',
    multitask_strategy = check_enum(b, 'multitask_strategy', STRATEGIES, 'reject'),
    on_completion = check_enum(b, 'on_completion', { delete = true, keep = true }, nil),
    if_not_exists = check_enum(b, 'if_not_exists', { create = true, reject = true }, 'reject'),
  }
  local after = b.after_seconds
  if absent(after) then after = 0 elseif type(after) ~= 'number' or after < 0 or after > MAX_AFTER_SECONDS then
    http(422, 'after_seconds must be a number from 0 to ' .. MAX_AFTER_SECONDS)
  end
  r.after_seconds = after
  local vals = {}
  for _, f in ipairs(KWARGS) do
    if not absent(b[f]) then vals[f] = raw[f] end
  end
  vals.stream_mode = stream_mode
  if absent(b.checkpoint_id) and is_object(b.checkpoint) and type(b.checkpoint.checkpoint_id) == 'string' then
    vals.checkpoint_id = jstr(b.checkpoint.checkpoint_id)
  end
  if absent(b.input) and raw.input then vals.input = 'null' end -- input: null, as sent
  r.kwargs = object(KWARGS, vals)
  return r
end

-- Drops the oldest finished runs of a thread that has MAX_RUNS.
local function trim_runs(tid)
  local k = tkey(tid) .. ':runs'
  local n = redis.call('ZCARD', k)
  if n < MAX_RUNS then return end
  local drop = n - MAX_RUNS + 1
  for _, rid in ipairs(redis.call('ZRANGE', k, 0, 2 * MAX_QUEUE + drop)) do
    local r = run_record(rid)
    if not r or TERMINAL[r.status] then
      delete_run(tid, rid)
      drop = drop - 1
      if drop == 0 then return end
    end
  end
  http(409, 'thread "' .. tid .. '" has ' .. MAX_RUNS .. ' runs that have not finished')
end

local function runs_create(c)
  local r = run_body(c)
  local stateless = c.a.stateless == true
  local tid = path_id(c, 'thread_id')
  local rid = fresh_id(c, 'run_id')
  local after_seq = c.a.after_seq
  if absent(after_seq) then after_seq = 0 elseif not is_int(after_seq, 0, 1e15) then fail('args.after_seq must be an integer') end
  if not route(r.assistant_id, c.clock) then
    local live = live_assistants(c.clock)
    http(404, 'assistant "' .. r.assistant_id .. '" not found: no worker serves it' ..
         (#live == 0 and ' (no worker is running)' or (' (live: ' .. table.concat(live, ', ') .. ')')))
  end
  local t = thread_record(tid)
  if not t then
    if not stateless and r.if_not_exists ~= 'create' then http(404, 'thread "' .. tid .. '" not found') end
    if #tid > 128 or not string.match(tid, ID_PATTERN) then
      http(422, 'thread_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -')
    end
    t = new_thread(tid, c.now, nil, nil)
  end
  local tk = tkey(tid)
  trim_runs(tid)

  local active = active_run(tid)
  if active then
    local strategy = r.multitask_strategy
    if strategy == 'reject' then
      http(409, 'thread "' .. tid .. '" is busy with run "' .. active.run_id .. '"; multitask_strategy "reject" ' ..
           'refuses a second run (use "enqueue", "interrupt" or "rollback")')
    end
    if redis.call('LLEN', tk .. ':queue') >= MAX_QUEUE then
      http(409, 'thread "' .. tid .. '" already has ' .. MAX_QUEUE .. ' runs waiting')
    end
  end

  r.run_id, r.thread_id, r.status = rid, tid, 'pending'
  r.created_at, r.updated_at = tostring(c.now), tostring(c.now)
  r.after_seq = tostring(after_seq)
  r.temporary = (stateless and r.on_completion ~= 'keep') and '1' or '0'
  r.on_completion = r.on_completion or (stateless and 'delete' or 'keep')
  redis.call('HSET', rkey(rid), 'run_id', rid, 'thread_id', tid, 'assistant_id', r.assistant_id, 'status', 'pending',
             'created_at', c.now, 'updated_at', c.now, 'metadata', r.metadata, 'kwargs', r.kwargs,
             'multitask_strategy', r.multitask_strategy, 'after_seq', after_seq, 'on_completion', r.on_completion,
             'temporary', r.temporary, 'after_seconds', r.after_seconds)
  redis.call('ZADD', tk .. ':runs', c.now, rid)

  if not active then
    dispatch(r, c.clock)
  elseif r.multitask_strategy == 'enqueue' then
    redis.call('RPUSH', tk .. ':queue', rid)
  else -- interrupt or rollback: the active run stops, this one goes next
    send_cancel(active, r.multitask_strategy)
    redis.call('LPUSH', tk .. ':queue', rid)
  end

  -- The thread runs this assistant now (LangGraph's metadata keys, so
  -- threads can be searched by graph).
  t.metadata = merge(t.metadata or '{}', '{"graph_id":' .. jstr(r.assistant_id) .. ',"assistant_id":' .. jstr(r.assistant_id) .. '}')
  redis.call('HSET', tk, 'metadata', t.metadata, 'status', 'busy', 'updated_at', c.now)
  if r.temporary == '1' then redis.call('HSET', tk, 'temporary', '1') end
  if t.expires_at then
    apply_ttl(tid, t)
    redis.call('PEXPIREAT', rkey(rid), t.expires_at)
  end
  if r.after_seconds > 0 then
    return { 200, run_json(r), '{"dispatch_at":' .. string.format('%d', c.now + r.after_seconds * 1000) .. '}' }
  end
  return { 200, run_json(r) }
end

local function runs_list(c)
  local tid = path_id(c, 'thread_id')
  local limit = query_int(c, 'limit', 10, 1, MAX_LIMIT)
  local offset = query_int(c, 'offset', 0, 0, MAX_RUNS)
  local status = query1(c, 'status')
  if status and not RUN_STATUSES[status] then
    http(422, 'query parameter status must be pending, running, success, error, timeout or interrupted')
  end
  thread_or_404(tid)
  local out, skipped = {}, 0
  for _, rid in ipairs(redis.call('ZREVRANGE', tkey(tid) .. ':runs', 0, MAX_RUNS - 1)) do
    local r = run_record(rid)
    if r and (not status or r.status == status) then
      if skipped < offset then
        skipped = skipped + 1
      else
        out[#out + 1] = run_json(r)
        if #out >= limit then break end
      end
    end
  end
  return { 200, '[' .. table.concat(out, ',') .. ']' }
end

local function runs_get(c)
  local tid = path_id(c, 'thread_id')
  thread_or_404(tid)
  local r = run_or_404(tid, path_id(c, 'run_id'))
  return { 200, run_json(r), '{"after_seq":' .. (tonumber(r.after_seq) or 0) .. '}' }
end

local function runs_delete(c)
  local tid, rid = path_id(c, 'thread_id'), path_id(c, 'run_id')
  thread_or_404(tid)
  local r = run_or_404(tid, rid)
  local active = redis.call('GET', tkey(tid) .. ':active')
  if active == rid and not TERMINAL[r.status] then
    http(409, 'run "' .. rid .. '" is ' .. r.status .. ' on thread "' .. tid .. '"; cancel it first')
  end
  delete_run(tid, rid)
  return { 204, '' }
end

local function runs_cancel(c)
  local tid, rid = path_id(c, 'thread_id'), path_id(c, 'run_id')
  local action = query1(c, 'action') or 'interrupt'
  if action ~= 'interrupt' and action ~= 'rollback' then
    http(422, 'query parameter action must be "interrupt" or "rollback"')
  end
  local wait = query1(c, 'wait')
  if wait and wait ~= '0' and wait ~= '1' and wait ~= 'true' and wait ~= 'false' then
    http(422, 'query parameter wait must be 0, 1, true or false')
  end
  thread_or_404(tid)
  local r = run_or_404(tid, rid)
  if TERMINAL[r.status] then return { 200, run_json(r) } end -- over already: nothing to cancel
  local active = redis.call('GET', tkey(tid) .. ':active')
  if active == rid then
    send_cancel(r, action) -- the worker stops it and reports run.finished
    return { 202, run_json(r) }
  end
  -- Still in the queue: it never reaches a worker.
  redis.call('LREM', tkey(tid) .. ':queue', 0, rid)
  r.updated_at = tostring(c.now)
  r.status = 'interrupted'
  if action == 'rollback' then
    delete_run(tid, rid)
  else
    redis.call('HSET', rkey(rid), 'status', 'interrupted', 'updated_at', c.now)
  end
  return { 200, run_json(r) }
end

-- The worker's reports take their fields from body (or, failing that, the args themselves).
local function report(c)
  if c.raw and not c.nobody then return c.body, c.raw end
  return c.a, c.rawargs
end

local function run_started(c)
  local b = report(c)
  local rid = b.run_id
  if type(rid) ~= 'string' or rid == '' then http(422, 'run_id is required') end
  if not absent(b.after_seq) and not is_int(b.after_seq, 0, 1e15) then http(422, 'after_seq must be an integer') end
  local r = run_record(rid)
  if not r then http(404, 'run "' .. rid .. '" not found') end
  if r.status ~= 'pending' and r.status ~= 'running' then
    http(409, 'run "' .. rid .. '" is ' .. r.status .. '; it must not start')
  end
  r.status, r.updated_at = 'running', tostring(c.now)
  redis.call('HSET', rkey(rid), 'status', 'running', 'updated_at', c.now)
  if not absent(b.after_seq) then
    r.after_seq = tostring(b.after_seq)
    redis.call('HSET', rkey(rid), 'after_seq', b.after_seq)
  end
  if thread_record(r.thread_id) then
    redis.call('HSET', tkey(r.thread_id), 'status', 'busy', 'updated_at', c.now)
  end
  return { 200, run_json(r) }
end

local function run_finished(c)
  local b, raw = report(c)
  local rid = b.run_id
  if type(rid) ~= 'string' or rid == '' then http(422, 'run_id is required') end
  local status = b.status
  if status ~= 'success' and status ~= 'error' and status ~= 'interrupted' and status ~= 'timeout' then
    http(422, 'status must be "success", "error", "interrupted" or "timeout"')
  end
  if not absent(b.values) and type(b.values) ~= 'table' then http(422, 'values must be an object or an array') end
  if not absent(b.interrupts) and not is_object_text(raw.interrupts) then http(422, 'interrupts must be an object') end
  local r = run_record(rid)
  if not r then http(404, 'run "' .. rid .. '" not found') end
  if TERMINAL[r.status] then return { 200, run_json(r) } end -- reported twice
  local tid = r.thread_id
  local tk = tkey(tid)
  local rollback = r.cancel == 'rollback'
  r.status, r.updated_at = status, tostring(c.now)
  if rollback then
    delete_run(tid, rid)
  else
    redis.call('HSET', rkey(rid), 'status', status, 'updated_at', c.now)
    if not absent(b.error) then redis.call('HSET', rkey(rid), 'error', raw.error) end
  end
  if redis.call('GET', tk .. ':active') == rid then redis.call('DEL', tk .. ':active') end
  local t = thread_record(tid)
  if not t then return { 200, run_json(r) } end
  local extra = {}
  if r.temporary == '1' and r.on_completion == 'delete' then
    delete_thread(tid)
    return { 200, run_json(r), '{"thread_deleted":true}' }
  end
  -- The thread's status: waiting for an answer, failed, or idle.
  -- (interrupt_before/after stop with nodes to run and no interrupt values: `next`)
  local interrupted = (not absent(b.interrupts) and next(b.interrupts) ~= nil) or
                      (type(b.next) == 'table' and b.next[1] ~= nil)
  local tstatus = interrupted and 'interrupted' or ((status == 'error' or status == 'timeout') and 'error' or 'idle')
  local f = { 'status', tstatus, 'updated_at', c.now }
  if not rollback then
    if not absent(b.values) then
      f[#f + 1], f[#f + 2] = 'values', raw.values
      f[#f + 1], f[#f + 2] = 'state_updated_at', c.now
    end
    f[#f + 1], f[#f + 2] = 'interrupts', absent(b.interrupts) and '{}' or raw.interrupts
  end
  redis.call('HSET', tk, unpack(f))
  if tstatus == 'error' and not absent(b.error) then
    redis.call('HSET', tk, 'error', raw.error)
  else
    redis.call('HDEL', tk, 'error')
  end
  local nextr = dispatch_next(tid, c.clock)
  if nextr then
    redis.call('HSET', tk, 'status', 'busy')
    extra[#extra + 1] = '"dispatched":' .. jstr(nextr.run_id)
  end
  apply_ttl(tid, t)
  if #extra > 0 then return { 200, run_json(r), '{' .. table.concat(extra, ',') .. '}' } end
  return { 200, run_json(r) }
end

-- ---- assistants -----------------------------------------------------------------------

-- The assistant's record as JSON text, or nil when no live worker serves it.
local function assistant_json(a, now)
  if not has_live(K .. ':w:' .. a, now) then return nil end
  local info = redis.call('HMGET', K .. ':ainfo:' .. a, 'name', 'created_at')
  local name = info[1] or a
  local at = info[2]
  local created = at and (tonumber(at) and iso(at) or at) or iso(now)
  return table.concat({
    '{"assistant_id":', jstr(a), ',"graph_id":', jstr(a), ',"name":', jstr(name),
    ',"config":{},"context":{},"metadata":{},"version":1,"created_at":', jstr(created),
    ',"updated_at":', jstr(created), ',"description":null}' }), name, created
end

local function assistant_or_404(c)
  local a = path_id(c, 'assistant_id')
  local j = #a <= 128 and assistant_json(a, c.clock)
  if not j then http(404, 'assistant "' .. a .. '" not found: no live worker serves it') end
  return a, j
end

local ASSISTANT_SORTS = { assistant_id = true, graph_id = true, name = true, created_at = true, updated_at = true }

local function assistants_search(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local limit, offset = paging(b)
  for _, f in ipairs({ 'graph_id', 'name' }) do
    if not absent(b[f]) and type(b[f]) ~= 'string' then http(422, f .. ' must be a string') end
  end
  if not absent(b.metadata) and not is_object(b.metadata) then http(422, 'metadata must be an object') end
  local sort_by, order = sorting(b, ASSISTANT_SORTS, '"assistant_id", "graph_id", "name", "created_at" or "updated_at"')
  local found = {}
  local names = redis.call('SMEMBERS', K .. ':assistants')
  for i = 1, math.min(#names, MAX_EXAMINE) do
    local a = names[i]
    if a ~= '*' and (absent(b.graph_id) or b.graph_id == a) then
      local j, name, created = assistant_json(a, c.clock)
      if j and (absent(b.name) or string.find(string.lower(name), string.lower(b.name), 1, true))
          and (absent(b.metadata) or contains({}, b.metadata)) then
        local key = ({ assistant_id = a, graph_id = a, name = name, created_at = created, updated_at = created })[sort_by]
        found[#found + 1] = { key = key, id = a, json = j }
      end
    end
  end
  table.sort(found, function(x, y)
    if x.key == y.key then return x.id < y.id end
    if order == 'asc' then return x.key < y.key end
    return x.key > y.key
  end)
  local out = {}
  for i = offset + 1, math.min(#found, offset + limit) do out[#out + 1] = found[i].json end
  return { 200, '[' .. table.concat(out, ',') .. ']' }
end

local function assistants_get(c)
  local _, j = assistant_or_404(c)
  return { 200, j }
end

local function assistant_info(field)
  return function(c)
    local a = assistant_or_404(c)
    return { 200, redis.call('HGET', K .. ':ainfo:' .. a, field) or '{}' }
  end
end

local REST_OPS = {
  ['threads.create'] = threads_create, ['threads.get'] = threads_get, ['threads.patch'] = threads_patch,
  ['threads.delete'] = threads_delete, ['threads.search'] = threads_search, ['threads.copy'] = threads_copy,
  ['runs.create'] = runs_create, ['runs.list'] = runs_list, ['runs.get'] = runs_get,
  ['runs.delete'] = runs_delete, ['runs.cancel'] = runs_cancel,
  ['run.started'] = run_started, ['run.finished'] = run_finished,
  ['assistants.search'] = assistants_search, ['assistants.get'] = assistants_get,
  ['assistants.graph'] = assistant_info('graph'), ['assistants.schemas'] = assistant_info('schemas'),
}

local function rest(keys, args)
  if keys[1] ~= K then fail('usage: FCALL threadcast_rest 1 ' .. K .. ' <op> <args-json>') end
  local op = args[1]
  local handler = op and REST_OPS[op]
  if not handler then fail('unknown op ' .. tostring(op) .. ' for threadcast_rest') end
  if type(args[2]) ~= 'string' then fail('args-json is required') end
  return answered(handler, request(args[2]))
end

redis.register_function('threadcast_rest', guarded(rest))
