#!lua name=threadcast
--
-- threadcast's Redis functions, first of three libraries: the producer
-- contract (atomic appends of a thread's events) and the command bridge's
-- routing. threadcast_store.lua (the Agent Protocol store) and
-- threadcast_rest.lua (the REST API's records) are the other two; the
-- gateway loads all three at once (protocol/README.md, "The function
-- libraries"). This one loads on its own too: workers and tools that only
-- append and register load this file when Redis has none named threadcast.
--
--   FCALL threadcast_append 1 <thread_id> <event-json> [MAXLEN n] [TTL s] [RUN run_id] [BATCH id]
--     -> the new seq
--   FCALL threadcast_append_batch 1 <thread_id> <count> <event-json>... [MAXLEN n] [TTL s] [RUN run_id] [BATCH id]
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
-- handful of Lua string operations; per call, one HMGET, one HSET, one
-- TIME and one SPUBLISH. The keys' TTLs are refreshed only when an eighth of
-- the TTL has passed since the last refresh (an idle thread's keys expire
-- between 7/8 of the TTL and the TTL after its last event), and the rarely
-- written indexes get theirs when they are written.

-- ==== the shared prelude ===============================================================
--
-- Every library starts with this section, so what they share is written once:
-- every key and channel name the functions use (keys), errors (fail,
-- guarded), Redis' clock, the namespace encoding, the command router, and the
-- JSON text and HTTP answer helpers of threadcast_store and threadcast_rest.
-- A function of one library cannot call another library's locals, so the
-- build copies this section into the other two: scripts/embed.py --libraries
-- puts it after their first line (the `#!lua name=…` line) when it embeds them
-- into the gateway, and --library prints one library so assembled (for tests
-- and tools that load them without the gateway). Edit it here only; everything
-- from the banner above to the one that ends it is copied.

-- An error reply; error() carries it out of nested calls to the entry point
-- (as a string: Redis 7.0's pcall turns error tables into strings).
local FAIL = 'threadcast: '
local function fail(msg)
  error(FAIL .. msg, 0)
end

-- Runs f, turning fail()'s errors into error replies.
local function guarded(f)
  return function(KEYS, args)
    local ok, res = pcall(f, KEYS, args)
    if ok then return res end
    if type(res) == 'string' and string.sub(res, 1, #FAIL) == FAIL then
      return redis.error_reply('ERR ' .. res)
    end
    error(res, 0)
  end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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

-- ---- keys: every key and channel name of the Lua side ----------------------------------
--
-- The C side writes the same names in src/store.h, the LangGraph worker in
-- src/worker/keys.js; protocol/README.md ("Where key names live") says which
-- is which. (Entry points take their keys as KEYS, so this table is not
-- shadowed.)
local keys = {}

-- A thread T's keys and its doorbell channel: keys.thread(T) .. keys.META
-- and so on ({T} is the Cluster hash tag: a thread is one slot). The prefix
-- is made once per call: each key name is a new Lua string, hashed as made.
function keys.thread(tid) return 'tc:{' .. tid .. '}:' end
keys.META, keys.EVENTS, keys.LIVE = 'meta', 'events', 'live'
keys.TREE, keys.VALUES, keys.INTERRUPTS = 'tree', 'values', 'interrupts'

-- The command bridge and the REST API's records share the hash tag
-- {tc:commands}, the slot of tc:commands: creating a run, queueing it and
-- handing it to a worker are one atomic step.
keys.BRIDGE = '{tc:commands}'
keys.COMMANDS = 'tc:commands' -- the wildcard workers' command stream
keys.ASSISTANTS = keys.BRIDGE .. ':assistants' -- every assistant ever registered
-- The live workers of assistant a ("*": the wildcard workers), a's command
-- stream, and what a's workers wrote about it for the REST API.
function keys.workers(a) return keys.BRIDGE .. ':w:' .. a end
function keys.stream(a) return keys.BRIDGE .. ':a:' .. a end
function keys.ainfo(a) return keys.BRIDGE .. ':ainfo:' .. a end
-- The REST records: threads (and their runs, queue and active run), runs,
-- and the index of threads by creation.
keys.REST_THREADS = keys.BRIDGE .. ':threads'
function keys.rest_thread(tid) return keys.BRIDGE .. ':t:' .. tid end
function keys.rest_runs(tid) return keys.rest_thread(tid) .. ':runs' end
function keys.rest_queue(tid) return keys.rest_thread(tid) .. ':queue' end
function keys.rest_active(tid) return keys.rest_thread(tid) .. ':active' end
function keys.rest_run(rid) return keys.BRIDGE .. ':r:' .. rid end
-- The assistants: each one's record and its versions, and the index of
-- assistants by creation ("-" cannot follow the record prefix's ":").
function keys.rest_assistant(id) return keys.BRIDGE .. ':as:' .. id end
function keys.rest_assistant_versions(id) return keys.BRIDGE .. ':av:' .. id end
keys.REST_ASSISTANTS = keys.BRIDGE .. ':as-index'

-- The store, all under the hash tag {tc:store}: one slot. An item's member
-- is <encoded namespace> "\n" <key>.
keys.STORE = '{tc:store}'
function keys.store_item(member) return keys.STORE .. ':i:' .. member end
keys.STORE_ITEMS = keys.STORE .. ':items'
keys.STORE_NS = keys.STORE .. ':ns'
keys.STORE_NSCOUNT = keys.STORE .. ':nscount'
keys.STORE_EXPIRY = keys.STORE .. ':expiry'

-- ---- the command router ----------------------------------------------------------------
--
-- Where a command for an assistant (a graph) goes, and the stream entry it is,
-- for threadcast_submit (the gateway's runtime commands) and threadcast_rest
-- (REST runs and cancels) alike. Workers register the assistants they serve
-- (threadcast_register) and count as live until the time they gave, on
-- Redis' clock.
local router = { MAXLEN = 100000, MAX_LIVE_LIST = 16 }

-- Whether the live-workers set at key has a worker live at now.
function router.live(key, now)
  return redis.call('ZCOUNT', key, '(' .. now, '+inf') > 0
end

-- Assistants with live workers (at most MAX_LIVE_LIST), for errors and routing.
function router.live_assistants(now)
  local out = {}
  for _, a in ipairs(redis.call('SMEMBERS', keys.ASSISTANTS)) do
    if a ~= '*' and router.live(keys.workers(a), now) then
      out[#out + 1] = a
      if #out >= router.MAX_LIVE_LIST then break end
    end
  end
  table.sort(out)
  return out
end

-- The stream a command of assistant a goes to: its workers', else the
-- wildcard workers', else nil (nobody serves it). a may be "" (none known).
function router.stream(a, now)
  if a ~= '' and router.live(keys.workers(a), now) then return keys.stream(a) end
  if router.live(keys.workers('*'), now) then return keys.COMMANDS end
  return nil
end

-- Appends a command to stream: the fields every command entry has (the
-- worker contract in protocol/README.md).
function router.send(stream, tid, method, params, corr, reply, deadline)
  redis.call('XADD', stream, 'MAXLEN', '~', router.MAXLEN, '*', 'thread', tid, 'method', method,
             'params', params, 'corr', corr, 'reply', reply, 'deadline', deadline)
end

-- ---- HTTP answers, JSON text, time: for threadcast_store and threadcast_rest ---------------

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

-- ==== end of the shared prelude ========================================================

-- ==== the append path: threadcast_append, threadcast_append_batch ======================

local DEFAULT_MAXLEN = 10000
local DEFAULT_TTL = 86400
-- Numbers handed to redis.call are formatted with sprintf on every call; the
-- options keep the text they came as (or these) for the calls.
local DEFAULT_MAXLEN_ARG = '' .. DEFAULT_MAXLEN
local DEFAULT_TTL_ARG = '' .. DEFAULT_TTL
local MAX_EVENT_BYTES = 16777216
-- A call whose events' JSON passes this many bytes rings a thin doorbell
-- (no payload): every subscribed gateway reads the events from the stream.
-- Redis cuts a pub/sub client whose output passes 32 MiB (8 MiB for 60 s).
local LIVE_INLINE_MAX = 65536
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

-- Surrounding whitespace goes; a text that has none is left as it is.
local function trim(json)
  local first, last = string.byte(json, 1), string.byte(json, -1)
  if first == 123 and last == 125 then return json end -- '{' ... '}'
  return string.match(json, '^%s*(.*%S)') or ''
end

-- Parses the options after the events: MAXLEN, TTL, RUN, ASSISTANT, FENCE, BATCH.
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
    elseif opt == 'FENCE' then
      if #val < 1 or #val > 200 or string.find(val, '%c') then fail('FENCE must be 1 to 200 printable characters') end
      o.fence = val
    elseif opt == 'BATCH' then
      if #val < 1 or #val > 200 or string.find(val, '%c') then fail('BATCH must be 1 to 200 printable characters') end
      o.batch = val
    else
      fail('unknown option ' .. args[i] .. ' (expected MAXLEN, TTL, RUN, ASSISTANT, FENCE or BATCH)')
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
  local pre = keys.thread(tid)
  local k_meta, k_events = pre .. keys.META, pre .. keys.EVENTS
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local n = #events

  local m = redis.call('HMGET', k_meta, 'epoch', 'expires_at', 'ttl', 'seq', 'entry_max', 'entry_seq')
  local epoch, last = m[1], nil
  -- The largest stream entry of the history (its fields' bytes) through seq
  -- entry_seq: a reader that knows it can page that far with a plain XRANGE
  -- and still bound its replies.
  local entry_max, bytes = 0, 0
  for i = 1, n do
    local e = events[i]
    local b = 3 + #e.method + #e.nsenc + #e.json
    if b > entry_max then entry_max = b end
    bytes = bytes + #e.json
  end
  local ttl, ttl_s = o.ttl_arg, o.ttl
  if not epoch then
    -- A new history: whatever is left under the other keys belongs to an
    -- older one (meta expired or was deleted) and must not mix with it.
    -- Many threads live for a few events, so this is one HSET, and only
    -- meta and events (below) need a TTL: the others were just deleted,
    -- and an event that makes one again sets its TTL as it writes it.
    redis.call('DEL', k_events, pre .. keys.TREE, pre .. keys.VALUES, pre .. keys.INTERRUPTS)
    epoch = string.format('%x%05x', tonumber(now[1]), tonumber(now[2]))
    last = n
    redis.call('HSET', k_meta, 'epoch', epoch, 'run_seq', 1, 'run_id', epoch .. '-1', 'seq', n,
               'expires_at', now_ms + ttl_s * 1000, 'ttl', ttl, 'entry_max', entry_max, 'entry_seq', n)
  else
    local before = tonumber(m[4] or '0')
    if not before then fail('meta seq of thread ' .. tid .. ' is not a number') end
    last = before + n
    -- Measured only while every append measured: a history an earlier
    -- version began has no entry_max, and an append by an earlier version
    -- (its library loaded again during a rolling deploy) leaves entry_seq
    -- behind seq for good.
    local known, through = tonumber(m[5] or ''), tonumber(m[6] or '')
    if known and through == before then
      redis.call('HSET', k_meta, 'seq', last, 'entry_seq', last, 'entry_max', math.max(known, entry_max))
    else
      redis.call('HSET', k_meta, 'seq', last)
    end
  end
  -- The graph the thread runs: gateways route its commands to its workers.
  if o.assistant then redis.call('HSET', k_meta, 'assistant_id', o.assistant) end
  local first = last - n + 1
  local sfirst = '' .. first -- a number is formatted (sprintf) each time it meets a string

  -- Keys written rarely get their TTL when written (touch): a key made
  -- between two refreshes of an idle thread must not outlive it.
  local thin = bytes > LIVE_INLINE_MAX
  local bell = n > 1 and not thin and { '*', epoch, '\n', sfirst, '\n', n, '\n' } or nil
  for i = 1, n do
    local e, seq = events[i], first + i - 1
    local id = (i == 1 and sfirst or '' .. seq) .. '-0'
    if i == n then
      redis.call('XADD', k_events, 'MAXLEN', '~', o.maxlen, id, 'm', e.method, 'n', e.nsenc, 'e', e.json)
    else
      redis.call('XADD', k_events, id, 'm', e.method, 'n', e.nsenc, 'e', e.json)
    end
    if e.method == 'lifecycle' then
      local k_tree, k_interrupts = pre .. keys.TREE, pre .. keys.INTERRUPTS
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
      local k_values = pre .. keys.VALUES
      redis.call('HSET', k_values, e.nsenc, seq .. '\n' .. e.json)
      redis.call('EXPIRE', k_values, ttl)
    elseif e.method == 'input.requested' then
      local k_interrupts = pre .. keys.INTERRUPTS
      redis.call('HSET', k_interrupts, e.interrupt_id, seq .. '\n' .. e.json)
      redis.call('EXPIRE', k_interrupts, ttl)
    elseif e.method == 'input.answered' then
      local k_interrupts = pre .. keys.INTERRUPTS
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
    for _, k in ipairs({ k_meta, k_events, pre .. keys.TREE, pre .. keys.VALUES, pre .. keys.INTERRUPTS }) do
      redis.call('EXPIRE', k, ttl)
    end
    redis.call('HSET', k_meta, 'expires_at', now_ms + ttl_s * 1000, 'ttl', ttl)
  end

  -- One doorbell for the call. One event: "<epoch>\n<seq>\n<method>\n<ns>\n<json>";
  -- a batch: "*<epoch>\n<first seq>\n<count>\n" then per event
  -- "<method>\n<ns>\n<json length>\n<json>"; more than LIVE_INLINE_MAX
  -- bytes of JSON: "#<epoch>\n<last seq>\n", the events only in the stream.
  local live = pre .. keys.LIVE
  if thin then
    redis.call('SPUBLISH', live, '#' .. epoch .. '\n' .. last .. '\n')
  elseif n == 1 then
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

-- FENCE <owner>: the append is refused unless the thread's lock (tc:{T}:lg:lock,
-- the LangGraph worker's) holds <owner>, so a worker that lost its thread (its
-- lease lapsed while Redis or the worker stalled, and another took the run
-- over) cannot append into the run it no longer has.
local function fenced(tid, o)
  if o.fence and redis.call('GET', keys.thread(tid) .. 'lg:lock') ~= o.fence then
    fail('FENCED: the lock of thread ' .. tid .. ' is not held by ' .. o.fence)
  end
end

-- BATCH <id>: a call that carries the id of the thread's last call was
-- appended already (a client resent it: its connection broke before the
-- answer came back, as when Redis restarts); it answers that call's seq
-- again instead of appending its events twice.
local function appended_before(tid, o)
  if not o.batch then return nil end
  local last = redis.call('HGET', keys.thread(tid) .. keys.META, 'batch')
  if not last then return nil end
  local id, first = string.match(last, '^(.*)\n(%d+)$')
  if id == o.batch then return tonumber(first) end
  return nil
end

-- Stores the events (storing the call's BATCH id with its first seq); returns the first seq.
local function store_once(tid, events, o, now)
  local first = store(tid, events, o, now)
  if o.batch then redis.call('HSET', keys.thread(tid) .. keys.META, 'batch', o.batch .. '\n' .. first) end
  return first
end

local function append(KEYS, args)
  check_thread(KEYS[1])
  if not args[1] then fail(USAGE) end
  local o = options(args, 2)
  local again = appended_before(KEYS[1], o)
  if again then return again end
  fenced(KEYS[1], o)
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  return store_once(KEYS[1], { prepare(args[1], 'event', now_ms) }, o, now)
end

local function append_batch(KEYS, args)
  check_thread(KEYS[1])
  local n = tonumber(args[1])
  if not n or n < 1 or n ~= math.floor(n) or n > MAX_BATCH then
    fail('count must be an integer from 1 to ' .. MAX_BATCH .. '; ' .. USAGE)
  end
  if #args < n + 1 then fail('count is ' .. n .. ' but only ' .. (#args - 1) .. ' events follow') end
  local o = options(args, n + 2)
  local again = appended_before(KEYS[1], o)
  if again then return again end
  fenced(KEYS[1], o)
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local events = {}
  for i = 1, n do events[i] = prepare(args[i + 1], EVENT_NAMES[i] or ('event ' .. i), now_ms) end
  return store_once(KEYS[1], events, o, now)
end

-- ==== reading a thread's events: threadcast_range =======================================
--
--   FCALL_RO threadcast_range 1 <thread_id> <after seq> <through seq, 0: the end> <count> <max bytes>
--     -> { entries, more }
--
-- The events after <after> (at most through <through>) as XRANGE gives them,
-- at most <count>, and no more once <max bytes> of fields were read: events
-- may be 16 MiB, and a plain XRANGE of 512 could make a reply of gigabytes.
-- more is 1 when more may follow (count or bytes reached), 0 at the range's
-- end. At least one event is returned when there is one.

-- Entries read per XRANGE: from 1, doubling to RANGE_CHUNK while they are
-- small, so that a big event is never read with others it cannot go with.
local RANGE_CHUNK = 32

local function range(KEYS, args)
  check_thread(KEYS[1])
  local after, through = args[1], args[2]
  local count, budget = tonumber(args[3]), tonumber(args[4])
  if not (after and string.match(after, '^%d+$') and through and string.match(through, '^%d+$')) or
      not count or count < 1 or count ~= math.floor(count) or not budget or budget < 1 then
    fail('usage: FCALL_RO threadcast_range 1 <thread_id> <after seq> <through seq or 0> <count> <max bytes>')
  end
  local k = keys.thread(KEYS[1]) .. keys.EVENTS
  local from, to = after .. '-1', through == '0' and '+' or (through .. '-0')
  local out, n, bytes, chunk = {}, 0, 0, 1
  while n < count do
    local want = math.min(chunk, count - n)
    chunk = math.min(chunk * 2, RANGE_CHUNK)
    local got = redis.call('XRANGE', k, from, to, 'COUNT', want)
    for _, e in ipairs(got) do
      n = n + 1
      out[n] = e
      for _, f in ipairs(e[2]) do bytes = bytes + #f end
      from = '(' .. e[1]
      if bytes >= budget then return { out, 1 } end
    end
    if #got < want then return { out, 0 } end
  end
  return { out, 1 }
end

-- ==== the command bridge: threadcast_register, threadcast_submit ========================
--
-- Workers register the assistants (graphs) they serve; a gateway sends a
-- command to the stream of the assistant it is for, or refuses it at once
-- when no live worker serves it. Every key has the hash tag {tc:commands}
-- (the slot of tc:commands, the wildcard workers' stream); the router (in
-- the prelude) makes the choice, for threadcast_rest's runs too.
--
--   FCALL threadcast_register 2 {tc:commands}:w:<assistant> {tc:commands}:assistants
--         <assistant> <worker> <live ms>                      -> 1
--     the worker counts as live for <live ms> (Redis' clock); "*" serves any
--     assistant, from tc:commands.
--   FCALL threadcast_submit 4 tc:commands {tc:commands}:w:* {tc:commands}:w:<a> {tc:commands}:a:<a>
--         <a> <thread> <method> <params> <corr> <reply> <deadline>   -> the stream it went to
--     <a> may be "" (a thread that has not run): the wildcard workers, else
--     the one assistant that has live workers, if there is just one. An <a>
--     no worker serves that is an assistant of the REST API's records goes
--     to its graph's workers.

local function register(KEYS, args)
  local assistant, worker, live = args[1], args[2], tonumber(args[3])
  if not assistant or #assistant < 1 or #assistant > 128 or string.find(assistant, '[%c%s]') then
    fail('assistant must be 1 to 128 printable characters, no spaces')
  end
  if not worker or #worker < 1 or #worker > 200 then fail('worker name must be 1 to 200 bytes') end
  if not live or live < 1 then fail('live ms must be a positive number') end
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('ZADD', KEYS[1], now + live, worker)
  redis.call('PEXPIRE', KEYS[1], live * 4)
  redis.call('SADD', KEYS[2], assistant)
  return 1
end

-- The router decides; the KEYS the caller declares are the keys it names
-- (Redis Cluster routes the call by them).
local function submit(KEYS, args)
  local assistant = args[1]
  if not args[7] then fail('usage: FCALL threadcast_submit 4 <keys> <assistant> <thread> <method> <params> <corr> <reply> <deadline>') end
  local now = now_ms()
  local stream = router.stream(assistant, now)
  if assistant ~= '' and #assistant <= 128 and stream ~= keys.stream(assistant) then
    -- An assistant the REST API made (POST /assistants): its graph's workers.
    local graph = redis.call('HGET', keys.rest_assistant(assistant), 'graph_id')
    if graph then stream = router.stream(graph, now) or stream end
  end
  if not stream then
    local live = router.live_assistants(now)
    if assistant == '' and #live == 1 then
      stream = keys.stream(live[1])
    elseif assistant == '' then
      fail('no worker can take commands for this thread: it has not run yet and ' ..
           (#live == 0 and 'no worker is running' or ('several assistants are served (' .. table.concat(live, ', ') .. '); start a run first')))
    else
      fail('no worker serves assistant "' .. assistant .. '"' ..
           (#live == 0 and ' (no worker is running)' or (' (live: ' .. table.concat(live, ', ') .. ')')))
    end
  end
  router.send(stream, args[2], args[3], args[4], args[5], args[6], args[7])
  return stream
end

redis.register_function('threadcast_append', guarded(append))
redis.register_function('threadcast_append_batch', guarded(append_batch))
redis.register_function('threadcast_register', guarded(register))
redis.register_function('threadcast_submit', guarded(submit))
redis.register_function{ function_name = 'threadcast_range', callback = guarded(range), flags = { 'no-writes' } }
