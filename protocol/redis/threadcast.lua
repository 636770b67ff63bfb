#!lua name=threadcast
--
-- threadcast's producer contract: one atomic append per event.
--
--   FCALL threadcast_append 1 <thread_id> <event-json> [MAXLEN n] [TTL s] [RUN run_id]
--
-- validates the event, assigns the thread's next seq, appends it to the
-- thread's stream as entry <seq>-0, trims, refreshes TTLs, maintains the run,
-- tree, values, interrupts and checkpoint indexes, and SPUBLISHes the
-- doorbell (sharded pub/sub). Returns the new seq. Event data may spell the
-- protocol's field names either way (graph_name or graphName, interrupt_id
-- or interruptId, interrupt_ids or interruptIds).
-- A bad call gets an error that says what is wrong, and changes nothing.
-- protocol/README.md documents every key and field.

local DEFAULT_MAXLEN = 10000
local DEFAULT_TTL = 86400
local MAX_EVENT_BYTES = 1048576
local MAX_SEGMENTS = 32

local STATUSES = { started = true, running = true, completed = true, failed = true,
                   interrupted = true }
local METHODS = { values = true, updates = true, messages = true, tools = true,
                  lifecycle = true, ['input.requested'] = true, ['input.answered'] = true,
                  checkpoints = true,
                  tasks = true, custom = true }

local function fail(msg)
  return redis.error_reply('ERR threadcast: ' .. msg)
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
-- JSON text already known to be valid, or nil. Strings are skipped whole, so
-- braces or the word params inside them do not confuse it.
local function params_body_start(json)
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

local function append(keys, args)
  local tid = keys[1]
  if type(tid) ~= 'string' or #tid < 1 or #tid > 128 or not string.match(tid, '^[%w%._:%-]+$') then
    return fail('thread id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -')
  end
  local json = args[1]
  if not json then return fail('usage: FCALL threadcast_append 1 <thread_id> <event-json> [MAXLEN n] [TTL s] [RUN run_id]') end
  if #json > MAX_EVENT_BYTES then
    return fail('event is ' .. #json .. ' bytes; the limit is ' .. MAX_EVENT_BYTES)
  end

  local maxlen, ttl, run_id = DEFAULT_MAXLEN, DEFAULT_TTL, nil
  local i = 2
  while i <= #args do
    local opt, val = string.upper(args[i]), args[i + 1]
    if val == nil then return fail(opt .. ' needs a value') end
    if opt == 'MAXLEN' then
      maxlen = tonumber(val)
      if not maxlen or maxlen < 1 or maxlen ~= math.floor(maxlen) then return fail('MAXLEN must be a positive integer') end
    elseif opt == 'TTL' then
      ttl = tonumber(val)
      if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then return fail('TTL must be a positive integer (seconds)') end
    elseif opt == 'RUN' then
      if #val < 1 or #val > 128 or string.find(val, '%c') then return fail('RUN must be 1 to 128 printable characters') end
      run_id = val
    else
      return fail('unknown option ' .. args[i] .. ' (expected MAXLEN, TTL or RUN)')
    end
    i = i + 2
  end

  local ok, ev = pcall(cjson.decode, json)
  if not ok or type(ev) ~= 'table' then return fail('event must be a JSON object') end
  json = string.match(json, '^%s*(.-)%s*$')
  if string.sub(json, 1, 1) ~= '{' then return fail('event must be a JSON object') end
  for _, k in ipairs({ 'type', 'eventId', 'seq' }) do
    if ev[k] ~= nil then return fail('event must not carry "' .. k .. '": threadcast assigns it') end
  end
  local method = ev.method
  if type(method) ~= 'string' then return fail('event.method must be a string') end
  if not METHODS[method] and not string.match(method, '^custom:[^%c]+$') then
    return fail('event.method "' .. method .. '" is not an event method (values, updates, messages, tools, lifecycle, input.requested, input.answered, checkpoints, tasks, custom, custom:<name>)')
  end
  local params = ev.params
  if type(params) ~= 'table' then return fail('event.params must be an object') end
  local ns = params.namespace
  if not is_array_of_strings(ns) then return fail('event.params.namespace must be an array of strings') end
  if #ns > MAX_SEGMENTS then return fail('event.params.namespace has more than ' .. MAX_SEGMENTS .. ' segments') end
  if params.data == nil then return fail('event.params.data is required') end
  if method == 'lifecycle' then
    if type(params.data) ~= 'table' or not STATUSES[params.data.event] then
      return fail('lifecycle event.params.data.event must be started, running, completed, failed or interrupted')
    end
  end
  local now = redis.call('TIME')
  if params.timestamp == nil then
    local at = params_body_start(json)
    if not at then return fail('event.params must be written as a plain "params" key') end
    local ms = tostring(tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
    local sep = string.match(json, '^%s*}', at) and '' or ','
    json = string.sub(json, 1, at - 1) .. '"timestamp":' .. ms .. sep .. string.sub(json, at)
  elseif type(params.timestamp) ~= 'number' or params.timestamp < 0 then
    return fail('event.params.timestamp must be a non-negative number (ms since the epoch)')
  end

  local data = params.data
  local interrupt_id, answered
  if method == 'input.requested' then
    interrupt_id = type(data) == 'table' and (data.interrupt_id or data.interruptId)
    if type(interrupt_id) ~= 'string' or interrupt_id == '' then
      return fail('input.requested event.params.data.interrupt_id must be a non-empty string')
    end
  elseif method == 'input.answered' then
    answered = type(data) == 'table' and (data.interrupt_ids or data.interruptIds)
    if not is_array_of_strings(answered) then
      return fail('input.answered event.params.data.interrupt_ids must be an array of strings')
    end
  end

  local k_meta = 'tc:{' .. tid .. '}:meta'
  local k_events = 'tc:{' .. tid .. '}:events'
  local k_tree = 'tc:{' .. tid .. '}:tree'
  local k_values = 'tc:{' .. tid .. '}:values'
  local k_interrupts = 'tc:{' .. tid .. '}:interrupts'

  local epoch = redis.call('HGET', k_meta, 'epoch')
  if not epoch then
    -- A new history: whatever is left under the other keys belongs to an
    -- older one (meta expired or was deleted) and must not mix with it.
    redis.call('DEL', k_events, k_tree, k_values, k_interrupts)
    epoch = string.format('%x%05x', tonumber(now[1]), tonumber(now[2]))
    redis.call('HSET', k_meta, 'epoch', epoch, 'run_seq', 1, 'run_id', epoch .. '-1')
  end
  local seq = redis.call('HINCRBY', k_meta, 'seq', 1)
  local nsenc = encode_ns(ns)

  redis.call('XADD', k_events, 'MAXLEN', '~', maxlen, seq .. '-0', 'm', method, 'n', nsenc, 'e', json)
  if method == 'lifecycle' then
    local status = params.data.event
    if nsenc == '' and status == 'started' then
      redis.call('DEL', k_tree, k_interrupts)
      redis.call('HSET', k_meta, 'run_seq', seq, 'run_id', run_id or (epoch .. '-' .. seq))
    elseif nsenc == '' and (status == 'completed' or status == 'failed') then
      redis.call('DEL', k_interrupts) -- the run is over: nothing waits for an answer
    end
    local graph = params.data.graph_name
    if type(graph) ~= 'string' then graph = params.data.graphName end
    if type(graph) ~= 'string' then
      local old = redis.call('HGET', k_tree, nsenc)
      graph = old and string.match(old, '^[^\n]*\n(.*)$') or ''
    end
    redis.call('HSET', k_tree, nsenc, status .. '\n' .. graph)
    if nsenc == '' then redis.call('HSET', k_meta, 'run_status', status) end
  elseif method == 'values' then
    redis.call('HSET', k_values, nsenc, seq .. '\n' .. json)
  elseif method == 'input.requested' then
    redis.call('HSET', k_interrupts, interrupt_id, seq .. '\n' .. json)
  elseif method == 'input.answered' then
    for _, id in ipairs(answered) do redis.call('HDEL', k_interrupts, id) end
  elseif method == 'checkpoints' and nsenc == '' then
    redis.call('HSET', k_meta, 'checkpoint', seq .. '\n' .. json)
  end
  for _, k in ipairs({ k_meta, k_events, k_tree, k_values, k_interrupts }) do
    redis.call('EXPIRE', k, ttl)
  end
  redis.call('SPUBLISH', 'tc:{' .. tid .. '}:live',
    epoch .. '\n' .. seq .. '\n' .. method .. '\n' .. nsenc .. '\n' .. json)
  return seq
end

redis.register_function('threadcast_append', append)
