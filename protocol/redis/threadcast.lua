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
  local o = { maxlen = DEFAULT_MAXLEN, ttl = DEFAULT_TTL }
  while i <= #args do
    local opt, val = string.upper(args[i]), args[i + 1]
    if val == nil then fail(opt .. ' needs a value') end
    if opt == 'MAXLEN' then
      o.maxlen = tonumber(val)
      if not o.maxlen or o.maxlen < 1 or o.maxlen ~= math.floor(o.maxlen) then fail('MAXLEN must be a positive integer') end
    elseif opt == 'TTL' then
      o.ttl = tonumber(val)
      if not o.ttl or o.ttl < 1 or o.ttl ~= math.floor(o.ttl) then fail('TTL must be a positive integer (seconds)') end
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
  if string.sub(json, 1, 1) ~= '{' then fail(what .. ' must be a JSON object') end
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
  local k_meta = 'tc:{' .. tid .. '}:meta'
  local k_events = 'tc:{' .. tid .. '}:events'
  local k_tree = 'tc:{' .. tid .. '}:tree'
  local k_values = 'tc:{' .. tid .. '}:values'
  local k_interrupts = 'tc:{' .. tid .. '}:interrupts'
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local n = #events

  local m = redis.call('HMGET', k_meta, 'epoch', 'expires_at', 'ttl')
  local epoch = m[1]
  if not epoch then
    -- A new history: whatever is left under the other keys belongs to an
    -- older one (meta expired or was deleted) and must not mix with it.
    redis.call('DEL', k_events, k_tree, k_values, k_interrupts)
    epoch = string.format('%x%05x', tonumber(now[1]), tonumber(now[2]))
    redis.call('HSET', k_meta, 'epoch', epoch, 'run_seq', 1, 'run_id', epoch .. '-1')
  end
  local last = redis.call('HINCRBY', k_meta, 'seq', n)
  -- The graph the thread runs: gateways route its commands to its workers.
  if o.assistant then redis.call('HSET', k_meta, 'assistant_id', o.assistant) end
  local first = last - n + 1

  -- Keys written rarely get their TTL when written (touch): a key made
  -- between two refreshes of an idle thread must not outlive it.
  local ttl = o.ttl
  local bell = n > 1 and { '*', epoch, '\n', first, '\n', n, '\n' } or nil
  for i = 1, n do
    local e, seq = events[i], first + i - 1
    if i == n then
      redis.call('XADD', k_events, 'MAXLEN', '~', o.maxlen, seq .. '-0', 'm', e.method, 'n', e.nsenc, 'e', e.json)
    else
      redis.call('XADD', k_events, seq .. '-0', 'm', e.method, 'n', e.nsenc, 'e', e.json)
    end
    if e.method == 'lifecycle' then
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
      redis.call('HSET', k_values, e.nsenc, seq .. '\n' .. e.json)
      redis.call('EXPIRE', k_values, ttl)
    elseif e.method == 'input.requested' then
      redis.call('HSET', k_interrupts, e.interrupt_id, seq .. '\n' .. e.json)
      redis.call('EXPIRE', k_interrupts, ttl)
    elseif e.method == 'input.answered' then
      for _, id in ipairs(e.answered) do redis.call('HDEL', k_interrupts, id) end
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
  local expires_at, ttl_was = tonumber(m[2]), tonumber(m[3])
  if not m[1] or ttl_was ~= ttl or not expires_at or expires_at - now_ms < ttl * 875 then
    for _, k in ipairs({ k_meta, k_events, k_tree, k_values, k_interrupts }) do redis.call('EXPIRE', k, ttl) end
    redis.call('HSET', k_meta, 'expires_at', now_ms + ttl * 1000, 'ttl', ttl)
  end

  -- One doorbell for the call. One event: "<epoch>\n<seq>\n<method>\n<ns>\n<json>";
  -- a batch: "*<epoch>\n<first seq>\n<count>\n" then per event
  -- "<method>\n<ns>\n<json length>\n<json>".
  local live = 'tc:{' .. tid .. '}:live'
  if n == 1 then
    local e = events[1]
    redis.call('SPUBLISH', live, epoch .. '\n' .. first .. '\n' .. e.method .. '\n' .. e.nsenc .. '\n' .. e.json)
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
