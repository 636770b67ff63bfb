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
local STORE_REJECT = 'threadcast-store-reject:'

-- An HTTP error reply, carried out of nested calls as a string.
local function reject(status, msg)
  error(STORE_REJECT .. status .. ':' .. msg, 0)
end
local function invalid(msg) reject(422, msg) end

-- ms since the epoch as ISO-8601 UTC with milliseconds (Redis' Lua has no
-- os.date): the civil date from a day count, in the proleptic Gregorian
-- calendar, by eras of 400 years.
local function iso_ms(ms)
  local floor = math.floor
  local secs = floor(ms / 1000)
  local days = floor(secs / 86400)
  local sod = secs - days * 86400
  local z = days + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, floor(sod / 3600),
                       floor(sod % 3600 / 60), sod % 60, ms % 1000)
end

-- Index of the last character of the JSON value that starts at i in s, a
-- text already known to be valid JSON.
local function json_value_end(s, i)
  local c = string.sub(s, i, i)
  if c == '"' then
    local j = i + 1
    while true do
      local q = string.find(s, '["\\]', j)
      if string.sub(s, q, q) == '"' then return q end
      j = q + 2
    end
  elseif c == '{' or c == '[' then
    local depth, j = 0, i
    while true do
      local q = string.find(s, '[%[%]{}"]', j)
      local d = string.sub(s, q, q)
      if d == '"' then
        q = json_value_end(s, q)
      elseif d == '{' or d == '[' then
        depth = depth + 1
      else
        depth = depth - 1
        if depth == 0 then return q end
      end
      j = q + 1
    end
  end
  local _, e = string.find(s, '^[^,}%]%s]+', i)
  return e
end

-- Start and end of the raw text of member `name` of the JSON object whose
-- '{' is at i (the last one when the name repeats, as cjson decodes), or nil.
local function json_member(s, i, name)
  local found_s, found_e
  local j = string.find(s, '[^%s]', i + 1)
  while string.sub(s, j, j) ~= '}' do
    if string.sub(s, j, j) == ',' then j = string.find(s, '[^%s]', j + 1) end
    local ke = json_value_end(s, j)
    local key = cjson.decode(string.sub(s, j, ke))
    local v = string.find(s, '[^%s]', string.find(s, ':', ke + 1, true) + 1)
    local ve = json_value_end(s, v)
    if key == name then found_s, found_e = v, ve end
    j = string.find(s, '[^%s]', ve + 1)
  end
  return found_s, found_e
end

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
local function given(v) return v ~= nil and v ~= cjson.null end

local function check_int(v, field, default, min, max)
  if not given(v) then return default end
  if type(v) ~= 'number' or v ~= math.floor(v) or not (v >= min and v <= (max or math.huge)) then
    invalid(field .. ' must be an integer ' .. (max and ('from ' .. min .. ' to ' .. max) or ('>= ' .. min)))
  end
  return v
end

local function check_bool(v, field)
  if not given(v) then return true end
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
  if not given(filter) then return nil end
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
         ',"created_at":"' .. iso_ms(tonumber(h[4])) .. '","updated_at":"' .. iso_ms(tonumber(h[5])) .. '"}'
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
    local bs = json_member(raw, string.find(raw, '{', 1, true), 'body')
    local vs, ve = json_member(raw, bs, 'value')
    value = string.sub(raw, vs, ve)
  end
  if not value or string.sub(value, 1, 1) ~= '{' then invalid('value must be a JSON object') end
  if #value > STORE_MAX_VALUE then
    invalid('value is ' .. #value .. ' bytes of JSON; the limit is ' .. STORE_MAX_VALUE)
  end
  local index = body.index
  if given(index) and index ~= false and not is_array_of_strings(index) then
    invalid('index must be false, null or an array of field paths')
  end
  local ttl = body.ttl
  if given(ttl) and (type(ttl) ~= 'number' or not (ttl > 0 and ttl <= STORE_MAX_TTL)) then
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
  if given(ttl) then
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
    reject(404, 'no item with key ' .. cjson.encode(key) .. ' in namespace ' .. cjson.encode(ns))
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
  if not given(prefix) then prefix = {} end
  check_labels(prefix, 'namespace_prefix', 0)
  local filter = check_filter(body.filter)
  local limit = check_int(body.limit, 'limit', 10, 1, STORE_MAX_LIMIT)
  local offset = check_int(body.offset, 'offset', 0, 0)
  if given(body.query) and type(body.query) ~= 'string' then invalid('query must be a string or null') end
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
  prefix = given(prefix) and check_labels(prefix, 'prefix', 0) or {}
  suffix = given(suffix) and check_labels(suffix, 'suffix', 0) or {}
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
  local done, res = pcall(op, a, raw, now)
  if done then return res end
  if type(res) == 'string' and string.sub(res, 1, #STORE_REJECT) == STORE_REJECT then
    local status, msg = string.match(res, '^(%d+):(.*)$', #STORE_REJECT + 1)
    return { tonumber(status), cjson.encode({ detail = msg }) }
  end
  error(res, 0)
end

redis.register_function('threadcast_store', guarded(store_call))
-- ==== end of threadcast_store ==========================================================
