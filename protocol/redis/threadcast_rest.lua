#!lua name=threadcast_rest
--
-- threadcast's Redis functions, third of three libraries: the records of the
-- Agent Protocol REST API. It begins with the shared prelude of
-- threadcast.lua (key names, errors, the clock, the command router, JSON text
-- and HTTP answers), which the build puts right after this line; so
-- assembled, it loads alone (scripts/embed.py --library prints it).

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
                       events = true, debug = true, custom = true, tasks = true, checkpoints = true,
                       tools = true }

-- A Lua string as a JSON string (cjson is not there while the library loads).
local function jstr(s) return cjson.encode(s) end

-- ---- two servers ------------------------------------------------------------------------
--
-- threadcast answers as LangGraph's JavaScript server (@langchain/langgraph-api) answers, and
-- a Python graph's routes as its Python server (langgraph-api) answers them: a run's default
-- multitask strategy, the run and thread records' shapes, the errors' words (and, in the
-- gateway, their JSON body). Which one: the graph the op concerns (its workers write
-- language = "python" into its ainfo hash; none written: JavaScript), else the record's own
-- (runs and threads keep the language they were made in), else the gateway's setting
-- (args.flavor, --rest-flavor). A reply whose flavour is not the one the gateway gave says so
-- in its extra: {"flavor": "python" | "javascript"}.
local JAVASCRIPT, PYTHON = 'javascript', 'python'

-- The language of graph g's workers.
local function graph_flavor(g)
  if type(g) ~= 'string' or g == '' or g == '*' or #g > 128 then return JAVASCRIPT end
  return redis.call('HGET', keys.ainfo(g), 'language') == PYTHON and PYTHON or JAVASCRIPT
end

-- A record's language (a field absent: JavaScript, as every record made before there were two).
local function record_flavor(rec) return rec and rec.language == PYTHON and PYTHON or JAVASCRIPT end

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
  -- The server the answers imitate (see "Two servers" below): the gateway's setting, until the op
  -- finds the graph (or the record) it concerns.
  c.given = a.flavor == PYTHON and PYTHON or JAVASCRIPT
  c.flavor = c.given
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

-- The id a create names in body member field (1 to 128 of A-Z a-z 0-9 . _ : -), else the fresh one.
local function body_id(c, field)
  local id = c.body[field]
  if absent(id) then return fresh_id(c, field) end
  if type(id) ~= 'string' or #id > 128 or not string.match(id, ID_PATTERN) then
    http(422, field .. ' must be 1 to 128 characters of A-Z a-z 0-9 . _ : -')
  end
  return id
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
local function thread_record(tid) return record(tid, keys.rest_thread) end
local function run_record(rid) return record(rid, keys.rest_run) end

-- Whether a worker has registered graph g (the wildcard is none).
local function is_graph(g)
  return type(g) == 'string' and g ~= '*' and #g <= 128 and redis.call('SISMEMBER', keys.ASSISTANTS, g) == 1
end

-- The thread; a thread that is there makes the op answer in its language.
local function thread_or_404(tid, c)
  local t = thread_record(tid)
  if not t then http(404, 'Thread with ID ' .. tid .. ' not found') end -- both servers' words
  if c then c.flavor = record_flavor(t) end
  return t
end

-- The run, which must be the thread's (not found: the words of op's route on the Python server).
local function run_or_404(tid, rid, c, python_words)
  local r = run_record(rid)
  if not r or r.thread_id ~= tid then
    http(404, c.flavor == PYTHON and python_words or ('run "' .. rid .. '" not found on thread "' .. tid .. '"'))
  end
  c.flavor = record_flavor(r)
  return r
end

-- A thread as the JavaScript server answers it: values and interrupts {} until a run reports
-- them, error only while the thread is in error.
local function thread_json_js(t)
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

-- A thread as the Python server answers it: its members as that server's records have them
-- (a new thread's values null, a copy's none; error and interrupts once a run has ended).
local function thread_json_py(t)
  local parts = {
    '{"thread_id":', jstr(t.thread_id),
    ',"created_at":', jstr(iso(t.created_at)),
    ',"updated_at":', jstr(iso(t.updated_at)),
    ',"state_updated_at":', jstr(iso(t.state_updated_at or t.updated_at)),
    ',"metadata":', t.metadata or '{}',
    ',"status":', jstr(t.status or 'idle'),
    ',"config":', t.config or '{}',
  }
  for _, f in ipairs({ 'values', 'error', 'interrupts' }) do
    if t[f] then parts[#parts + 1] = ',"' .. f .. '":' .. t[f] end
  end
  parts[#parts + 1] = '}'
  return table.concat(parts)
end

local function thread_json(t)
  if t.language == PYTHON then return thread_json_py(t) end
  return thread_json_js(t)
end

-- A run as its server answers it; a Python graph's with the kwargs the Python server keeps
-- (kwargs_py) and its langsmith_session_name.
local function run_json(r)
  local python = r.language == PYTHON
  return table.concat({
    '{"run_id":', jstr(r.run_id),
    ',"thread_id":', jstr(r.thread_id),
    ',"assistant_id":', jstr(r.assistant_id),
    ',"created_at":', jstr(iso(r.created_at)),
    ',"updated_at":', jstr(iso(r.updated_at)),
    ',"status":', jstr(r.status),
    ',"metadata":', r.metadata or '{}',
    ',"kwargs":', (python and r.kwargs_py) or r.kwargs or '{}',
    ',"multitask_strategy":', jstr(r.multitask_strategy or 'reject'),
    python and ',"langsmith_session_name":null}' or '}' })
end

-- A thread with a TTL takes its runs, queue and active run with it.
local function apply_ttl(tid, t)
  local at = tonumber(t.expires_at)
  if not at then return end
  for _, k in ipairs({ keys.rest_thread(tid), keys.rest_runs(tid), keys.rest_queue(tid), keys.rest_active(tid) }) do
    redis.call('PEXPIREAT', k, at)
  end
end

-- Hands run r to a worker (a rest.run entry) and makes it the thread's active run.
local function dispatch(r, now)
  -- A queued run whose workers have gone waits on its assistant's stream
  -- (the consumer group keeps it for the next worker that serves it).
  local graph = r.graph_id or r.assistant_id
  local stream = router.stream(graph, now) or keys.stream(graph)
  local kw = r.kwargs or '{}'
  local inner = string.sub(kw, 2, -2)
  local params = table.concat({
    '{"run_id":', jstr(r.run_id), ',"thread_id":', jstr(r.thread_id),
    ',"assistant_id":', jstr(r.assistant_id), ',"graph_id":', jstr(graph), ',"metadata":', r.metadata or '{}',
    ',"on_completion":', jstr(r.on_completion or 'keep'),
    ',"temporary":', r.temporary == '1' and 'true' or 'false',
    ',"after_seconds":', r.after_seconds or '0',
    inner ~= '' and ',' or '', inner, '}' })
  router.send(stream, r.thread_id, 'rest.run', params, r.run_id, '', '0')
  redis.call('HSET', keys.rest_run(r.run_id), 'stream', stream)
  redis.call('SET', keys.rest_active(r.thread_id), r.run_id)
  r.stream = stream
  return stream
end

-- Asks the worker running r to stop it (a rest.cancel entry). reason: why, in the Python
-- server's words (its thread's error says it when the run ends).
local function send_cancel(r, action, reason)
  local graph = r.graph_id or r.assistant_id
  local stream = r.stream or router.stream(graph, now_ms()) or keys.stream(graph)
  router.send(stream, r.thread_id, 'rest.cancel',
              '{"run_id":' .. jstr(r.run_id) .. ',"thread_id":' .. jstr(r.thread_id) .. ',"action":' .. jstr(action) .. '}',
              r.run_id, '', '0')
  redis.call('HSET', keys.rest_run(r.run_id), 'cancel', action)
  if reason then redis.call('HSET', keys.rest_run(r.run_id), 'cancel_reason', reason) end
end

local function delete_run(tid, rid)
  redis.call('DEL', keys.rest_run(rid))
  redis.call('ZREM', keys.rest_runs(tid), rid)
  redis.call('LREM', keys.rest_queue(tid), 0, rid)
end

-- Every record of a thread: the thread, its runs, queue and active marker.
local function delete_thread(tid)
  local tk = keys.rest_thread(tid)
  local rids = redis.call('ZRANGE', keys.rest_runs(tid), 0, -1)
  for _, rid in ipairs(rids) do redis.call('DEL', keys.rest_run(rid)) end
  redis.call('DEL', tk, keys.rest_runs(tid), keys.rest_queue(tid), keys.rest_active(tid))
  redis.call('ZREM', keys.REST_THREADS, tid)
end

-- The thread's active run, when it still is one (a stale marker is cleared).
local function active_run(tid)
  local rid = redis.call('GET', keys.rest_active(tid))
  if not rid then return nil end
  local r = run_record(rid)
  if r and not TERMINAL[r.status] then return r end
  redis.call('DEL', keys.rest_active(tid))
  return nil
end

-- Dispatches the first queued run that is still pending; returns it or nil.
local function dispatch_next(tid, now)
  for _ = 1, MAX_QUEUE + 1 do
    local rid = redis.call('LPOP', keys.rest_queue(tid))
    if not rid then return nil end
    local r = run_record(rid)
    if r and r.status == 'pending' then
      dispatch(r, now)
      return r
    end
  end
  return nil
end

-- A new idle thread. flavor: the server whose thread it is (a Python one starts with values
-- null and no interrupts; a copy (copy true) has no values at all, as that server copies).
local function new_thread(tid, now, metadata, ttl, flavor, copy)
  local t = { thread_id = tid, created_at = tostring(now), updated_at = tostring(now), metadata = metadata or '{}',
              status = 'idle', config = '{}' }
  local f = { 'thread_id', tid, 'created_at', now, 'updated_at', now, 'metadata', t.metadata, 'status', 'idle',
              'config', '{}' }
  if flavor == PYTHON then
    t.language = PYTHON
    f[#f + 1], f[#f + 2] = 'language', PYTHON
    if not copy then
      t.values = 'null'
      f[#f + 1], f[#f + 2] = 'values', 'null'
    end
  else
    t.interrupts = '{}'
    f[#f + 1], f[#f + 2] = 'interrupts', '{}'
  end
  redis.call('HSET', keys.rest_thread(tid), unpack(f))
  if ttl then
    t.expires_at = string.format('%d', now + ttl * 60000)
    redis.call('HSET', keys.rest_thread(tid), 'expires_at', t.expires_at)
    apply_ttl(tid, t)
  end
  redis.call('ZADD', keys.REST_THREADS, now, tid)
  return t
end

-- ---- threads --------------------------------------------------------------------------

-- A create's supersteps ([{updates: [{values?, command?, as_node?}, …]}, …]), checked: the
-- graph (metadata.graph_id) whose state they update, or nil when there are none.
local function supersteps_graph(c, tid)
  local steps = c.body.supersteps
  if absent(steps) or (type(steps) == 'table' and next(steps) == nil) then return nil end
  if type(steps) ~= 'table' or steps[1] == nil then http(422, 'supersteps must be an array of {"updates": [...]}') end
  for i, step in ipairs(steps) do
    if not is_object(step) or type(step.updates) ~= 'table' or (next(step.updates) ~= nil and step.updates[1] == nil) then
      http(422, 'supersteps[' .. (i - 1) .. '].updates must be an array')
    end
    for j, u in ipairs(step.updates) do
      if not is_object(u) or (not absent(u.as_node) and type(u.as_node) ~= 'string') then
        http(422, 'supersteps[' .. (i - 1) .. '].updates[' .. (j - 1) .. '] must be {values?, command?, as_node?}')
      end
    end
  end
  local md = c.body.metadata
  local graph = is_object(md) and md.graph_id
  if type(graph) ~= 'string' then http(400, 'Thread ' .. tid .. ' has no graph ID') end
  if not is_graph(graph) and not router.live(keys.workers('*'), c.clock) then http(404, 'Graph "' .. graph .. '" not found') end
  return graph
end

local function threads_create(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local tid = body_id(c, 'thread_id')
  local metadata = check_metadata(c, 'metadata')
  local if_exists = b.if_exists
  if absent(if_exists) then if_exists = 'raise' end
  if if_exists ~= 'raise' and if_exists ~= 'do_nothing' then http(422, 'if_exists must be "raise" or "do_nothing"') end
  local ttl = check_ttl(c)
  local graph = supersteps_graph(c, tid)
  local t = thread_record(tid)
  if t then c.flavor = record_flavor(t) end
  if t and if_exists == 'raise' then
    http(409, c.flavor == PYTHON and ('Thread with ID ' .. tid .. ' already exists') or ('thread "' .. tid .. '" already exists'))
  end
  t = t or new_thread(tid, c.now, metadata, ttl, c.flavor)
  -- State updates to make: the gateway has a worker of the graph apply them (rest.state.bulk).
  if graph then return { 200, thread_json(t), '{"supersteps":true,"graph_id":' .. jstr(graph) .. '}' } end
  return { 200, thread_json(t) }
end

local function threads_get(c)
  return { 200, thread_json(thread_or_404(path_id(c, 'thread_id'), c)) }
end

local function threads_patch(c)
  local tid = path_id(c, 'thread_id')
  if not c.nobody then body_object(c) end
  local metadata = check_metadata(c, 'metadata')
  local ttl = check_ttl(c)
  local t = thread_or_404(tid, c)
  if metadata then
    t.metadata = merge(t.metadata or '{}', metadata)
    redis.call('HSET', keys.rest_thread(tid), 'metadata', t.metadata)
  end
  t.updated_at = tostring(c.now)
  redis.call('HSET', keys.rest_thread(tid), 'updated_at', c.now)
  if ttl then
    t.expires_at = string.format('%d', c.now + ttl * 60000)
    redis.call('HSET', keys.rest_thread(tid), 'expires_at', t.expires_at)
    apply_ttl(tid, t)
    for _, rid in ipairs(redis.call('ZRANGE', keys.rest_runs(tid), 0, -1)) do
      redis.call('PEXPIREAT', keys.rest_run(rid), t.expires_at)
    end
  end
  return { 200, thread_json(t) }
end

local function threads_delete(c)
  local tid = path_id(c, 'thread_id')
  thread_or_404(tid, c)
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

-- A search's or count's filters (metadata, values, status) as a test of a
-- thread record. As the reference server: containment for metadata and
-- values, and a thread without values passes any values filter.
local function thread_filter(b)
  local mfilter, vfilter = b.metadata, b.values
  if not absent(mfilter) and not is_object(mfilter) then http(422, 'metadata must be an object') end
  if not absent(vfilter) and not is_object(vfilter) then http(422, 'values must be an object') end
  local status = b.status
  if absent(status) then status = nil elseif not THREAD_STATUSES[status] then
    http(422, 'status must be "idle", "busy", "interrupted" or "error"')
  end
  return function(t)
    return (not status or t.status == status)
      and (absent(mfilter) or contains(cjson.decode(t.metadata or '{}'), mfilter))
      and (absent(vfilter) or not t.values or t.values == 'null' or contains(cjson.decode(t.values), vfilter))
  end
end

local function threads_search(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local matches = thread_filter(b)
  local limit, offset = paging(b)
  local sort_by, order = sorting(b, THREAD_SORTS, '"thread_id", "status", "created_at" or "updated_at"')
  if not absent(b.extract) then http(422, 'extract is not supported') end
  local ids = b.ids
  if not absent(ids) then
    if not is_strings(ids) then http(422, 'ids must be an array of strings') end
    if #ids > MAX_IDS then http(422, 'ids has ' .. #ids .. ' entries; at most ' .. MAX_IDS) end
    if #ids == 0 then ids = nil end -- no ids: every thread, as the reference server
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
    candidates = redis.call('ZRANGE', keys.REST_THREADS, 0, MAX_EXAMINE - 1)
  else
    candidates = redis.call('ZREVRANGE', keys.REST_THREADS, 0, MAX_EXAMINE - 1)
  end
  local want = offset + limit
  local found = {}
  for _, tid in ipairs(candidates) do
    local t = thread_record(tid)
    if not t then
      if not ids then redis.call('ZREM', keys.REST_THREADS, tid) end -- expired (TTL)
    elseif matches(t) then
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

-- POST /threads/count: how many threads pass the filters, among the newest MAX_EXAMINE.
local function threads_count(c)
  if not c.nobody then body_object(c) end
  local matches = thread_filter(c.body)
  local n = 0
  for _, tid in ipairs(redis.call('ZREVRANGE', keys.REST_THREADS, 0, MAX_EXAMINE - 1)) do
    local t = thread_record(tid)
    if not t then
      redis.call('ZREM', keys.REST_THREADS, tid) -- expired (TTL)
    elseif matches(t) then
      n = n + 1
    end
  end
  return { 200, tostring(n) }
end

-- A copy: the JavaScript server's takes the source's metadata, config, values and
-- interrupts; the Python server's only its metadata.
local function threads_copy(c)
  local tid = path_id(c, 'thread_id')
  local src = thread_or_404(tid, c)
  local nid = fresh_id(c, 'thread_id')
  if thread_record(nid) then http(409, 'thread "' .. nid .. '" already exists') end
  local t = new_thread(nid, c.now, src.metadata, nil, c.flavor, true)
  if c.flavor == PYTHON then return { 200, thread_json(t) } end
  local f = { 'config', src.config or '{}', 'interrupts', src.interrupts or '{}' }
  t.config, t.interrupts = src.config, src.interrupts
  if src.values then
    t.values, t.state_updated_at = src.values, src.state_updated_at
    f[#f + 1], f[#f + 2] = 'values', src.values
    if src.state_updated_at then f[#f + 1], f[#f + 2] = 'state_updated_at', src.state_updated_at end
  end
  redis.call('HSET', keys.rest_thread(nid), unpack(f))
  return { 200, thread_json(t) }
end

-- ---- assistants: the records --------------------------------------------------------
--
-- An assistant is a graph (graph_id) with its own config, context, metadata,
-- name and description, kept in versions: every PATCH makes the next one.
-- Each graph the workers have registered has a system assistant, made here
-- the first time it is needed (and again should it have been deleted, as
-- the reference server makes them each time it starts), whose id is the
-- reference server's: a version 5 UUID of the graph id.

local GRAPH_NAMESPACE = '6ba7b821-9dad-11d1-80b4-00c04fd430c8'
local ASSISTANT_FIELDS = { 'assistant_id', 'graph_id', 'name', 'config', 'context', 'metadata', 'version',
                           'created_at', 'updated_at', 'description' }
local VERSION_FIELDS = { 'assistant_id', 'version', 'graph_id', 'config', 'context', 'metadata', 'created_at',
                         'name', 'description' }

-- The version 5 (SHA-1) UUID of name in the namespace ns (a UUID's text).
local function uuid5(ns, name)
  local nsbytes = string.gsub(string.gsub(ns, '-', ''), '%x%x', function(x) return string.char(tonumber(x, 16)) end)
  local h = redis.sha1hex(nsbytes .. name)
  local b6 = tonumber(string.sub(h, 13, 14), 16) % 16 + 0x50 -- the version
  local b8 = tonumber(string.sub(h, 17, 18), 16) % 64 + 0x80 -- the variant
  return string.format('%s-%s-%02x%s-%02x%s-%s', string.sub(h, 1, 8), string.sub(h, 9, 12), b6, string.sub(h, 15, 16),
                       b8, string.sub(h, 19, 20), string.sub(h, 21, 32))
end

-- The id an assistant is asked for by: a graph id means its system assistant (as the reference server).
local function assistant_id_of(id)
  if is_graph(id) then return uuid5(GRAPH_NAMESPACE, id) end
  return id
end

local function assistant_record(id) return record(id, keys.rest_assistant) end

-- The JSON text of a value a worker wrote, or nil when it is not JSON of the kind wanted.
local function worker_json(text, want_object)
  if type(text) ~= 'string' then return nil end
  local ok, v = pcall(cjson.decode, text)
  if not ok or (want_object and (type(v) ~= 'table' or not is_object_text(text))) then return nil end
  return text
end

local function assistant_json(a, fields)
  local vals = {
    assistant_id = jstr(a.assistant_id), graph_id = jstr(a.graph_id), name = jstr(a.name or a.graph_id),
    config = a.config or '{}', context = a.context or '{}', metadata = a.metadata or '{}', version = a.version or '1',
    created_at = jstr(iso(a.created_at)), updated_at = jstr(iso(a.updated_at or a.created_at)),
    description = a.description or 'null',
  }
  return object(fields or ASSISTANT_FIELDS, vals)
end

-- Version v of assistant a (as it is now), made at now.
local function version_json(a, v, now)
  return object(VERSION_FIELDS, {
    assistant_id = jstr(a.assistant_id), version = v, graph_id = jstr(a.graph_id), config = a.config or '{}',
    context = a.context or '{}', metadata = a.metadata or '{}', created_at = jstr(iso(now)), name = jstr(a.name),
    description = a.description or 'null' })
end

-- Writes a's record (every field) and, when v is given, its version v.
local function save_assistant(a, v, now)
  local f = { 'assistant_id', a.assistant_id, 'graph_id', a.graph_id, 'name', a.name, 'config', a.config,
              'context', a.context, 'metadata', a.metadata, 'version', a.version, 'versions', a.versions,
              'created_at', a.created_at, 'updated_at', a.updated_at }
  if a.description then f[#f + 1], f[#f + 2] = 'description', a.description end
  redis.call('HSET', keys.rest_assistant(a.assistant_id), unpack(f))
  if not a.description then redis.call('HDEL', keys.rest_assistant(a.assistant_id), 'description') end
  if v then redis.call('HSET', keys.rest_assistant_versions(a.assistant_id), v, version_json(a, v, now)) end
end

-- A new assistant, version 1.
local function new_assistant(a, now)
  a.version, a.versions, a.created_at, a.updated_at = '1', '1', now, now
  save_assistant(a, '1', now)
  redis.call('ZADD', keys.REST_ASSISTANTS, now, a.assistant_id)
  return a
end

-- Graph g's system assistant, made when it is missing: the config and
-- context its workers registered (langgraph.json's env LANGGRAPH_CONFIG),
-- metadata {"created_by": "system"}, named after the graph.
local function system_assistant(g, now)
  local id = uuid5(GRAPH_NAMESPACE, g)
  local a = assistant_record(id)
  if a then return a end
  local info = redis.call('HMGET', keys.ainfo(g), 'config', 'context')
  return new_assistant({ assistant_id = id, graph_id = g, name = g, config = worker_json(info[1], true) or '{}',
                         context = worker_json(info[2], false) or '{}', metadata = '{"created_by":"system"}' }, now)
end

-- Makes the system assistants of every registered graph that lacks one.
local function system_assistants(now)
  for _, g in ipairs(redis.call('SMEMBERS', keys.ASSISTANTS)) do
    if g ~= '*' and #g <= 128 then system_assistant(g, now) end
  end
end

-- The assistant asked for by id (an assistant id or a graph id), or nil.
local function find_assistant(id, now)
  if is_graph(id) then return system_assistant(id, now) end
  return assistant_record(id)
end

-- Object text b's members laid over a's, with their configurable objects
-- merged the same way (how the reference server layers an assistant's,
-- a thread's and a run's configs).
local function merge_config(a, b)
  if not a or a == '{}' then return b end
  if not b or b == '{}' then return a end
  local out = merge(a, b)
  local ac, bc = members(a).configurable, members(b).configurable
  if is_object_text(ac) and is_object_text(bc) then out = merge(out, '{"configurable":' .. merge(ac, bc) .. '}') end
  return out
end

-- ---- runs -----------------------------------------------------------------------------

-- The body members a run keeps in kwargs, in this order, as sent.
local KWARGS = { 'input', 'command', 'config', 'context', 'stream_mode', 'stream_subgraphs', 'stream_resumable',
                 'interrupt_before', 'interrupt_after', 'checkpoint_id', 'checkpoint', 'checkpoint_during',
                 'durability', 'feedback_keys', 'webhook', 'on_disconnect' }
-- A Python graph's run hands its worker the request's config and context as they came, its
-- assistant ({config, context, metadata}) and thread ({config, metadata}) to layer them with
-- as the Python server does, and the request's id and start (configurable's
-- langgraph_request_id and __request_start_time_ms__).
local WORKER_KWARGS_PY = { 'input', 'command', 'config', 'context', 'stream_mode', 'stream_subgraphs',
                           'stream_resumable', 'interrupt_before', 'interrupt_after', 'checkpoint_id', 'checkpoint',
                           'checkpoint_during', 'durability', 'feedback_keys', 'webhook', 'on_disconnect',
                           'assistant', 'thread', 'request_id', 'request_start_ms' }

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

-- Checks the members of a config (a run's, an assistant's) that LangGraph reads.
local function check_config(cfg)
  if not absent(cfg.configurable) and not is_object(cfg.configurable) then http(422, 'config.configurable must be an object') end
  if not absent(cfg.tags) and not is_strings(cfg.tags) then http(422, 'config.tags must be an array of strings') end
  if not absent(cfg.recursion_limit) and not is_int(cfg.recursion_limit, 1, 1e9) then
    http(422, 'config.recursion_limit must be a positive integer')
  end
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
  if is_object(b.config) then check_config(b.config) end
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
        http(422, 'stream_mode "' .. m .. '" is not one of values, messages, messages-tuple, updates, events, debug, custom, tasks, checkpoints, tools')
      end
      if m == 'tools' and c.flavor == PYTHON then -- (the Python server's words)
        http(422, "stream_mode entries ['tools'] are only supported on the v2 event streaming endpoints.")
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
    -- (the JavaScript server's default is reject, the Python server's enqueue)
    multitask_strategy = check_enum(b, 'multitask_strategy', STRATEGIES, c.flavor == PYTHON and 'enqueue' or 'reject'),
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
  r.vals = vals -- kwargs, once the assistant's config and context are in (runs_create)
  return r
end

-- Drops the oldest finished runs of a thread that has MAX_RUNS.
local function trim_runs(tid)
  local k = keys.rest_runs(tid)
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

-- The assistant a run asks for: its record (a graph id: the graph's system
-- assistant); with a live wildcard worker, any other id is a graph of its
-- own with nothing configured (threadcast-agent serves every graph).
local function run_assistant(id, c)
  local a = find_assistant(id, c.now)
  if a then return a end
  if router.live(keys.workers('*'), c.clock) then return { assistant_id = id, graph_id = id } end
  http(404, 'No assistant found for "' .. id .. '". Make sure the assistant ID is for a valid assistant or a valid graph ID.')
end

-- A run's context: the assistant's object with the run's members over it
-- (an assistant's context that is not an object wins, as the reference server).
local function run_context(a, b)
  if not a or a == '{}' or a == 'null' then return b end
  if not is_object_text(a) then return a end
  if not b then return a end
  return merge(a, b)
end

-- Writes run r's record (r.run_id … r.after_seconds) and lists it among its thread's runs.
local function save_run(r, now)
  redis.call('HSET', keys.rest_run(r.run_id), 'run_id', r.run_id, 'thread_id', r.thread_id, 'assistant_id', r.assistant_id,
             'graph_id', r.graph_id, 'status', r.status, 'created_at', now, 'updated_at', now, 'metadata', r.metadata,
             'kwargs', r.kwargs, 'multitask_strategy', r.multitask_strategy, 'after_seq', r.after_seq,
             'on_completion', r.on_completion, 'temporary', r.temporary, 'after_seconds', r.after_seconds)
  if r.language == PYTHON then
    redis.call('HSET', keys.rest_run(r.run_id), 'language', PYTHON, 'kwargs_py', r.kwargs_py)
  end
  redis.call('ZADD', keys.rest_runs(r.thread_id), now, r.run_id)
end

-- Thread t runs run r's assistant now (LangGraph's metadata keys, so threads
-- can be searched by graph): its metadata says so, and it is busy.
local function thread_runs(t, r, now)
  t.metadata = merge(t.metadata or '{}', '{"graph_id":' .. jstr(r.graph_id) .. ',"assistant_id":' .. jstr(r.assistant_id) .. '}')
  redis.call('HSET', keys.rest_thread(r.thread_id), 'metadata', t.metadata, 'status', 'busy', 'updated_at', now)
end

-- ---- a Python graph's run, as the Python server records it --------------------------------
--
-- langgraph-api's create_valid_run and its runtime's Runs.put: the request's configurable and
-- context mirror each other; the checkpoint, the (absent) auth user, the request's id and start
-- and after_seconds join configurable; then configurable is the assistant's, the thread's, the
-- request's and {run_id, thread_id, graph_id, assistant_id, user_id}, key by key; metadata the
-- assistant's, the thread's, the config's and the run's; kwargs keep the result in the
-- server's own members. What the worker is handed (kwargs) stays the request's.

local PY_KWARGS = { 'input', 'command', 'config', 'context', 'stream_mode', 'interrupt_before', 'interrupt_after',
                    'webhook', 'feedback_keys', 'temporary', 'subgraphs', 'resumable', 'checkpoint_during',
                    'durability' }
local PY_BOTH_GIVEN = 'Cannot specify both configurable and context. Prefer setting context alone. Context was ' ..
                      'introduced in LangGraph 0.6.0 and is the long term planned replacement for configurable.'
local PY_NO_AUTH = '{"langgraph_auth_user":null,"langgraph_auth_user_id":"","langgraph_auth_permissions":[]}'

-- Whether a JSON value (its text; nil: absent) is false to Python: None, False, 0, "", [], {}.
local function py_falsy(text)
  if text == nil then return true end
  local ok, v = pcall(cjson.decode, text)
  return not ok or v == cjson.null or v == false or v == 0 or v == '' or (type(v) == 'table' and next(v) == nil)
end

-- Member name of an object text that is an object itself, else '{}'.
local function object_member(obj, name)
  if not is_object_text(obj) then return '{}' end
  local v = members(obj)[name]
  return is_object_text(v) and v or '{}'
end

-- An object text with member name set to the value text.
local function with_member(obj, name, text) return merge(obj, '{' .. jstr(name) .. ':' .. text .. '}') end

-- The request's config and context as create_valid_run makes them (texts).
local function py_request_config(c)
  local b, raw = c.body, c.raw
  local cfg = is_object_text(raw.config) and raw.config or '{}'
  local conf = object_member(cfg, 'configurable')
  local ctx = is_object(b.context) and next(b.context) ~= nil and raw.context or nil
  if ctx and not py_falsy(conf) then http(400, PY_BOTH_GIVEN) end
  if ctx then
    conf = with_member(ctx, '__context_provided__', 'true')
  else
    ctx = conf
  end
  if type(b.checkpoint_id) == 'string' and b.checkpoint_id ~= '' then
    conf = with_member(conf, 'checkpoint_id', jstr(b.checkpoint_id))
  end
  if is_object(b.checkpoint) and next(b.checkpoint) ~= nil then conf = merge(conf, raw.checkpoint) end
  conf = merge(conf, PY_NO_AUTH)
  if py_falsy(members(conf).langgraph_request_id) then
    local id = c.ids.request_id
    conf = with_member(conf, 'langgraph_request_id', type(id) == 'string' and jstr(id) or 'null')
  end
  conf = with_member(conf, '__request_start_time_ms__', c.now)
  conf = with_member(conf, '__after_seconds__', raw.after_seconds or '0')
  return with_member(cfg, 'configurable', conf), ctx
end

-- Run r of assistant asst on thread t (new: made by this run; active: the thread's run now, or
-- nil) as the Python server records it: r.metadata and r.kwargs_py. Returns the thread's
-- fields the run changes (a busy thread's none: the Python server leaves it alone).
local function py_run(c, r, asst, t, new, active)
  local b, raw = c.body, c.raw
  local cfg, ctx = py_request_config(c)
  local req_conf = object_member(cfg, 'configurable')
  local a_cfg = is_object_text(asst.config) and asst.config or '{}'
  local a_conf = object_member(a_cfg, 'configurable')
  local t_cfg = (not new and is_object_text(t.config)) and t.config or '{}'
  local t_conf = object_member(t_cfg, 'configurable')
  local cfg_md = object_member(cfg, 'metadata')
  local ids = '{"graph_id":' .. jstr(r.graph_id) .. ',"assistant_id":' .. jstr(r.assistant_id) .. '}'
  local fields, t_md = {}, t.metadata or '{}'
  if new then
    fields.metadata = merge(merge(ids, cfg_md), r.metadata)
    fields.config = merge(merge(a_cfg, cfg), '{"configurable":' .. a_conf .. '}')
    t_md = '{}'
  elseif not active then
    t_md = merge(t_md, ids)
    fields.metadata = t_md
    fields.config = merge(merge(merge(a_cfg, t_cfg), cfg), '{"configurable":' .. merge(a_conf, t_conf) .. '}')
  end
  local user = members(req_conf).user_id
  if py_falsy(user) then user = members(t_conf).user_id end
  if py_falsy(user) then user = members(a_conf).user_id end
  if py_falsy(user) then user = '""' end -- the unauthenticated user's id
  local conf = merge(merge(merge(a_conf, t_conf), req_conf), object({ 'run_id', 'thread_id', 'graph_id', 'assistant_id', 'user_id' }, {
    run_id = jstr(r.run_id), thread_id = jstr(r.thread_id), graph_id = jstr(r.graph_id),
    assistant_id = jstr(r.assistant_id), user_id = user }))
  local metadata = merge(merge(merge(is_object_text(asst.metadata) and asst.metadata or '{}', t_md), cfg_md), r.metadata)
  metadata = with_member(metadata, 'assistant_id', jstr(r.assistant_id))
  local a_ctx = is_object_text(asst.context) and asst.context or '{}'
  local vals = {
    input = raw.input or 'null', command = raw.command or 'null',
    config = merge(merge(merge(a_cfg, cfg), '{"configurable":' .. conf .. '}'), '{"metadata":' .. metadata .. '}'),
    context = merge(a_ctx, ctx), stream_mode = r.vals.stream_mode,
    interrupt_before = raw.interrupt_before or 'null', interrupt_after = raw.interrupt_after or 'null',
    webhook = raw.webhook or 'null', feedback_keys = raw.feedback_keys or 'null',
    temporary = r.temporary == '1' and 'true' or 'false',
    subgraphs = b.stream_subgraphs == true and 'true' or 'false',
    resumable = b.stream_resumable == true and 'true' or 'false',
    checkpoint_during = type(b.checkpoint_during) == 'boolean' and tostring(b.checkpoint_during) or 'true',
    durability = raw.durability or (b.checkpoint_during == false and '"exit"' or '"async"'),
  }
  r.metadata, r.kwargs_py = metadata, object(PY_KWARGS, vals)
  return fields
end

-- A Python run's kwargs once it runs: the Python server's worker writes into the config its
-- record holds (langgraph dev keeps records in memory, so its runs answer it) the metadata the
-- run streams with — the graph's workers wrote its server keys into the graph's ainfo
-- (run_metadata) — and configurable's node counter (a function: null in JSON).
local function py_started(kwargs, graph)
  local kv, order = members(kwargs)
  local cfg = is_object_text(kv.config) and kv.config or '{}'
  local conf = with_member(object_member(cfg, 'configurable'), '__pregel_node_finished', 'null')
  local md = object_member(cfg, 'metadata')
  local streamed = worker_json(redis.call('HGET', keys.ainfo(graph), 'run_metadata'), true)
  if streamed then md = merge(md, streamed) end
  kv.config = merge(cfg, object({ 'configurable', 'metadata' }, { configurable = conf, metadata = md }))
  return object(order, kv)
end

local function runs_create(c)
  body_object(c)
  -- The assistant's graph, when there is one, says whose server's run this is from the start
  -- (its default multitask strategy, the words of its errors).
  local named = c.body.assistant_id
  if type(named) == 'string' and #named >= 1 and #named <= 128 then
    local found = find_assistant(named, c.now)
    if found then c.flavor = graph_flavor(found.graph_id) end
  end
  local python = c.flavor == PYTHON
  local r = run_body(c)
  local stateless = c.a.stateless == true
  local tid = path_id(c, 'thread_id')
  local rid = fresh_id(c, 'run_id')
  local after_seq = c.a.after_seq
  if absent(after_seq) then after_seq = 0 elseif not is_int(after_seq, 0, 1e15) then fail('args.after_seq must be an integer') end
  local asst = run_assistant(r.assistant_id, c)
  r.assistant_id, r.graph_id = asst.assistant_id, asst.graph_id
  if not router.stream(r.graph_id, c.clock) then
    local live = router.live_assistants(c.clock)
    http(404, 'no worker serves graph "' .. r.graph_id .. '" of assistant "' .. r.assistant_id .. '"' ..
         (#live == 0 and ' (no worker is running)' or (' (live: ' .. table.concat(live, ', ') .. ')')))
  end
  local t = thread_record(tid)
  if python then
    -- The Python worker layers the run's config and context itself, as the Python server does
    -- (the assistant's, the thread's, the request's): it is handed the request's as they came,
    -- the assistant and the thread (as they are now), and the request's id and start.
    py_request_config(c) -- (its 400 comes before the thread is looked for)
    r.vals.assistant = object({ 'config', 'context', 'metadata' }, {
      config = is_object_text(asst.config) and asst.config or '{}', context = asst.context or '{}',
      metadata = is_object_text(asst.metadata) and asst.metadata or '{}' })
    if t then
      r.vals.thread = object({ 'config', 'metadata' }, { config = t.config or '{}', metadata = t.metadata or '{}' })
    end
    r.vals.request_id = type(c.ids.request_id) == 'string' and jstr(c.ids.request_id) or nil
    r.vals.request_start_ms = c.now
  else -- The assistant's config and context under the run's (as the JavaScript server).
    r.vals.config = merge_config(asst.config, r.vals.config)
    r.vals.context = run_context(asst.context, r.vals.context)
  end
  r.kwargs = object(python and WORKER_KWARGS_PY or KWARGS, r.vals)
  local new = not t
  if new then
    if not stateless and r.if_not_exists ~= 'create' then
      http(404, python and 'Thread or assistant not found.' or ('Thread with ID ' .. tid .. ' not found'))
    end
    if #tid > 128 or not string.match(tid, ID_PATTERN) then
      http(422, 'thread_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -')
    end
  end
  if new then t = new_thread(tid, c.now, nil, nil, c.flavor) end
  local tk = keys.rest_thread(tid)
  trim_runs(tid)

  local active = active_run(tid)
  if active then
    local strategy = r.multitask_strategy
    if strategy == 'reject' then
      http(409, python and 'Thread is already running a task. Wait for it to finish or choose a different multitask strategy.'
        or ('thread "' .. tid .. '" is busy with run "' .. active.run_id .. '"; multitask_strategy "reject" ' ..
            'refuses a second run (use "enqueue", "interrupt" or "rollback")'))
    end
    if redis.call('LLEN', keys.rest_queue(tid)) >= MAX_QUEUE then
      http(409, 'thread "' .. tid .. '" already has ' .. MAX_QUEUE .. ' runs waiting')
    end
  end

  r.run_id, r.thread_id, r.status = rid, tid, 'pending'
  r.created_at, r.updated_at = tostring(c.now), tostring(c.now)
  r.after_seq = tostring(after_seq)
  r.temporary = (stateless and r.on_completion ~= 'keep') and '1' or '0'
  r.on_completion = r.on_completion or (stateless and 'delete' or 'keep')
  local tfields
  if python then
    r.language = PYTHON
    tfields = py_run(c, r, asst, t, new, active)
  end
  save_run(r, c.now)

  if not active then
    dispatch(r, c.clock)
  elseif r.multitask_strategy == 'enqueue' then
    redis.call('RPUSH', keys.rest_queue(tid), rid)
  else -- interrupt or rollback: the active run stops, this one goes next
    send_cancel(active, r.multitask_strategy,
                'superseded by run ' .. rid .. ' (multitask_strategy=' .. r.multitask_strategy .. ')')
    redis.call('LPUSH', keys.rest_queue(tid), rid)
  end

  if python then -- the thread as the Python server's Runs.put leaves it
    local f = { 'status', 'busy', 'updated_at', c.now, 'language', PYTHON }
    for _, k in ipairs({ 'metadata', 'config' }) do
      if tfields[k] then f[#f + 1], f[#f + 2] = k, tfields[k] end
    end
    redis.call('HSET', tk, unpack(f))
  else
    thread_runs(t, r, c.now)
    if not active then -- and its config: the assistant's, the thread's, the run's (as the reference server)
      local cfg = merge_config(merge_config(asst.config, t.config), c.raw.config)
      if cfg then redis.call('HSET', tk, 'config', cfg) end
    end
    if t.language then redis.call('HDEL', tk, 'language') end -- (a JavaScript graph's run: its server's thread)
  end
  if r.temporary == '1' then redis.call('HSET', tk, 'temporary', '1') end
  if t.expires_at then
    apply_ttl(tid, t)
    redis.call('PEXPIREAT', keys.rest_run(rid), t.expires_at)
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
  thread_or_404(tid, c)
  local out, skipped = {}, 0
  for _, rid in ipairs(redis.call('ZREVRANGE', keys.rest_runs(tid), 0, MAX_RUNS - 1)) do
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
  thread_or_404(tid, c)
  local r = run_or_404(tid, path_id(c, 'run_id'), c, 'Not Found')
  return { 200, run_json(r), '{"after_seq":' .. (tonumber(r.after_seq) or 0) .. '}' }
end

local function runs_delete(c)
  local tid, rid = path_id(c, 'thread_id'), path_id(c, 'run_id')
  thread_or_404(tid, c)
  local r = run_or_404(tid, rid, c, 'Run not found')
  local active = redis.call('GET', keys.rest_active(tid))
  if active == rid and not TERMINAL[r.status] then
    http(409, 'run "' .. rid .. '" is ' .. r.status .. ' on thread "' .. tid .. '"; cancel it first')
  end
  delete_run(tid, rid)
  return { 204, '' }
end

-- A cancelled run that never started: interrupted, or (rollback) deleted.
local function cancel_unstarted(tid, rid, r, action, now)
  r.status, r.updated_at = 'interrupted', tostring(now)
  if action == 'rollback' then
    delete_run(tid, rid)
  else
    redis.call('HSET', keys.rest_run(rid), 'status', 'interrupted', 'updated_at', now)
  end
end

-- POST …/cancel. The JavaScript server answers the run (202 while a worker stops it); the
-- Python server answers 202 and nothing (its cancel of a run that is over is a 404), and its
-- thread's error names the cancel (run.finished).
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
  thread_or_404(tid, c)
  local r = run_or_404(tid, rid, c, 'No runs found to cancel.')
  local python = c.flavor == PYTHON
  local function done(status) -- the answer once the cancel is made
    if python then return { 202, '' } end
    return { status, run_json(r) }
  end
  if TERMINAL[r.status] then -- over already: nothing to cancel
    if python then
      http(404, "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs " ..
                "haven't been deleted or completed.")
    end
    return { 200, run_json(r) }
  end
  local reason = python and (action .. ' requested via POST /threads/{thread_id}/runs/{run_id}/cancel') or nil
  local active = redis.call('GET', keys.rest_active(tid))
  if active == rid then
    send_cancel(r, action, reason) -- the worker stops it and reports run.finished
    if r.status ~= 'pending' then return done(202) end
    -- Handed over but not started (it waits for its after_seconds or its thread): over now, as
    -- the reference server has it. The worker holding it finds the mark and never runs it; it
    -- appends the run's start and end so that streams of it end too.
    redis.call('DEL', keys.rest_active(tid))
    cancel_unstarted(tid, rid, r, action, c.now)
    local t = thread_record(tid)
    local waiting = t and t.interrupts and t.interrupts ~= '{}'
    redis.call('HSET', keys.rest_thread(tid), 'status', waiting and 'interrupted' or 'idle', 'updated_at', c.now)
    if dispatch_next(tid, c.clock) then redis.call('HSET', keys.rest_thread(tid), 'status', 'busy') end
    return done(200)
  end
  -- Still in the queue: it never reaches a worker.
  redis.call('LREM', keys.rest_queue(tid), 0, rid)
  cancel_unstarted(tid, rid, r, action, c.now)
  return done(200)
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
  redis.call('HSET', keys.rest_run(rid), 'status', 'running', 'updated_at', c.now)
  if not absent(b.after_seq) then
    r.after_seq = tostring(b.after_seq)
    redis.call('HSET', keys.rest_run(rid), 'after_seq', b.after_seq)
  end
  if r.language == PYTHON and r.kwargs_py then
    r.kwargs_py = py_started(r.kwargs_py, r.graph_id)
    redis.call('HSET', keys.rest_run(rid), 'kwargs_py', r.kwargs_py)
  end
  if thread_record(r.thread_id) then
    redis.call('HSET', keys.rest_thread(r.thread_id), 'status', 'busy', 'updated_at', c.now)
  end
  return { 200, run_json(r) }
end

-- A run a worker started over the protocol (run.start) on a thread the REST API
-- knows: recorded as a running run of it, so runs.get, runs.join and runs.list
-- show it as the reference server shows every run. A thread without a record
-- (a protocol-only thread) records nothing: 200 null.
local function run_adopted(c)
  local b, raw = report(c)
  for _, f in ipairs({ 'run_id', 'thread_id', 'assistant_id', 'graph_id' }) do
    if type(b[f]) ~= 'string' or b[f] == '' then http(422, f .. ' is required') end
  end
  if not is_int(b.after_seq, 0, 1e15) then http(422, 'after_seq must be an integer') end
  if not absent(b.kwargs) and not is_object_text(raw.kwargs) then http(422, 'kwargs must be an object') end
  local rid, tid = b.run_id, b.thread_id
  local known = run_record(rid)
  if known then return { 200, run_json(known) } end -- a worker taking the run over reports it again
  local t = thread_record(tid)
  if not t then return { 200, 'null' } end
  trim_runs(tid)
  local python = graph_flavor(b.graph_id) == PYTHON -- (its record answers as the Python server's runs)
  local r = { run_id = rid, thread_id = tid, assistant_id = b.assistant_id, graph_id = b.graph_id, status = 'running',
              created_at = tostring(c.now), updated_at = tostring(c.now), metadata = '{}',
              kwargs = absent(b.kwargs) and '{}' or raw.kwargs, multitask_strategy = python and 'enqueue' or 'reject',
              after_seq = tostring(b.after_seq), on_completion = 'keep', temporary = '0', after_seconds = 0 }
  save_run(r, c.now)
  if python then
    r.language = PYTHON
    redis.call('HSET', keys.rest_run(rid), 'language', PYTHON)
  end
  thread_runs(t, r, c.now)
  if t.expires_at then
    apply_ttl(tid, t)
    redis.call('PEXPIREAT', keys.rest_run(rid), t.expires_at)
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
  local tk = keys.rest_thread(tid)
  local rollback = r.cancel == 'rollback'
  r.status, r.updated_at = status, tostring(c.now)
  if rollback then
    delete_run(tid, rid)
  else
    redis.call('HSET', keys.rest_run(rid), 'status', status, 'updated_at', c.now)
    if not absent(b.error) then redis.call('HSET', keys.rest_run(rid), 'error', raw.error) end
  end
  if redis.call('GET', keys.rest_active(tid)) == rid then redis.call('DEL', keys.rest_active(tid)) end
  local t = thread_record(tid)
  if not t then return { 200, run_json(r) } end
  local extra = {}
  if r.temporary == '1' and r.on_completion == 'delete' then
    delete_thread(tid)
    return { 200, run_json(r), '{"thread_deleted":true}' }
  end
  -- The thread's status, as the reference server sets it: failed (whatever
  -- was left to run), else waiting for an answer (interrupt_before/after
  -- stop with nodes to run and no interrupt values: `next`), else idle.
  local interrupted = (not absent(b.interrupts) and next(b.interrupts) ~= nil) or
                      (type(b.next) == 'table' and b.next[1] ~= nil)
  local tstatus = (status == 'error' or status == 'timeout') and 'error' or (interrupted and 'interrupted' or 'idle')
  local f = { 'status', tstatus, 'updated_at', c.now }
  if r.language == PYTHON then
    -- As the Python server's set_joint_status: its error always (null, the run's, or the
    -- cancel's: UserInterrupt / UserRollback with the reason), state_updated_at, and values and
    -- interrupts when there is a state to take them from.
    local err = 'null'
    if r.cancel then
      err = '{"error":' .. jstr(rollback and 'UserRollback' or 'UserInterrupt') .. ',"message":' ..
            jstr(r.cancel_reason or (rollback and 'User requested rollback of the run' or 'User interrupted the run')) .. '}'
    elseif tstatus == 'error' and not absent(b.error) then
      err = raw.error
    end
    f[#f + 1], f[#f + 2] = 'error', err
    f[#f + 1], f[#f + 2] = 'state_updated_at', c.now
    if not rollback then
      if not absent(b.values) then f[#f + 1], f[#f + 2] = 'values', raw.values end
      if not absent(b.interrupts) then f[#f + 1], f[#f + 2] = 'interrupts', raw.interrupts end
    end
    redis.call('HSET', tk, unpack(f))
  else
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
  end
  -- (An adopted run may end while a REST run of the thread is handed over and waits for the lock.)
  local nextr = redis.call('EXISTS', keys.rest_active(tid)) == 0 and dispatch_next(tid, c.clock)
  if nextr then
    redis.call('HSET', tk, 'status', 'busy')
    extra[#extra + 1] = '"dispatched":' .. jstr(nextr.run_id)
  end
  apply_ttl(tid, t)
  if #extra > 0 then return { 200, run_json(r), '{' .. table.concat(extra, ',') .. '}' } end
  return { 200, run_json(r) }
end

-- ---- assistants -----------------------------------------------------------------------

local ASSISTANT_SORTS = { assistant_id = true, graph_id = true, name = true, created_at = true, updated_at = true }
local ASSISTANT_NOT_FOUND = 'Assistant not found'

-- The assistant of the path (an assistant id or a graph id), or a 404.
local function assistant_or_404(c)
  local a = find_assistant(path_id(c, 'assistant_id'), c.now)
  if not a then http(404, ASSISTANT_NOT_FOUND) end
  return a
end

-- A graph an assistant may run: one the workers registered (or, with a
-- live wildcard worker, any).
local function check_graph(g)
  if type(g) ~= 'string' or g == '' or #g > 128 or string.find(g, '[%c%s]') then
    http(422, 'graph_id must be 1 to 128 printable characters, no spaces')
  end
  if not is_graph(g) and not router.live(keys.workers('*'), now_ms()) then http(404, 'Graph "' .. g .. '" not found') end
  return g
end

-- The members an assistant's create and update take: the texts to store (nil when absent).
local function assistant_body(c)
  local b, raw = c.body, c.raw
  local v = {}
  if not absent(b.graph_id) then v.graph_id = check_graph(b.graph_id) end
  if not absent(b.config) then
    if not is_object_text(raw.config) then http(422, 'config must be an object') end
    check_config(b.config)
    v.config = raw.config
  end
  if not absent(b.context) then v.context = raw.context end
  v.metadata = check_metadata(c, 'metadata')
  for _, f in ipairs({ 'name', 'description' }) do
    if not absent(b[f]) then
      if type(b[f]) ~= 'string' then http(422, f .. ' must be a string') end
      v[f] = b[f]
    end
  end
  return v
end

-- POST /assistants
-- The Python server keeps an assistant's config.configurable and its context copies of one
-- another (one given, the other is made from it; both: 400).
local function py_mirror(v)
  local conf = v.config and object_member(v.config, 'configurable') or '{}'
  local has_conf, has_ctx = not py_falsy(conf), not py_falsy(v.context)
  if has_conf and has_ctx then http(400, PY_BOTH_GIVEN) end
  if has_conf then
    v.context = conf
  elseif has_ctx then
    v.config = with_member(v.config or '{}', 'configurable', v.context)
  end
end

local function assistants_create(c)
  body_object(c)
  local b = c.body
  if absent(b.graph_id) then http(422, 'graph_id is required') end
  local v = assistant_body(c)
  local python = graph_flavor(v.graph_id) == PYTHON
  if python then
    c.flavor = PYTHON
    py_mirror(v)
  end
  local id = body_id(c, 'assistant_id')
  local if_exists = check_enum(b, 'if_exists', { raise = true, do_nothing = true }, 'raise')
  system_assistants(c.now)
  local old = assistant_record(id)
  if old then
    if if_exists == 'raise' then
      http(409, python and ('Assistant ' .. id .. ' already exists') or 'Assistant already exists')
    end
    return { 200, assistant_json(old) }
  end
  -- The reference server's defaults: "Untitled", or the graph id for an empty name.
  local name = v.name or 'Untitled'
  if name == '' then name = v.graph_id end
  local a = new_assistant({ assistant_id = id, graph_id = v.graph_id, name = name, config = v.config or '{}',
                            context = v.context or '{}', metadata = v.metadata or '{}',
                            description = v.description and jstr(v.description) }, c.now)
  return { 200, assistant_json(a) }
end

local function assistants_get(c)
  return { 200, assistant_json(assistant_or_404(c)) }
end

-- PATCH /assistants/:id: what is given replaces (metadata: merged), as a new version.
local function assistants_patch(c)
  if not c.nobody then body_object(c) end
  local v = assistant_body(c)
  local a = assistant_or_404(c)
  if graph_flavor(v.graph_id or a.graph_id) == PYTHON then -- (an empty config keeps the one there)
    c.flavor = PYTHON
    py_mirror(v)
    if v.config and py_falsy(v.config) then v.config = nil end
  end
  a.graph_id = v.graph_id or a.graph_id
  a.config = v.config or a.config
  a.context = v.context or a.context
  a.name = v.name or a.name
  if v.description then a.description = jstr(v.description) end
  if v.metadata then a.metadata = merge(a.metadata or '{}', v.metadata) end
  local n = string.format('%d', (tonumber(a.versions) or tonumber(a.version) or 1) + 1)
  a.version, a.versions, a.updated_at = n, n, c.now
  save_assistant(a, n, c.now)
  return { 200, assistant_json(a) }
end

-- The threads whose metadata names assistant id (among the newest MAX_EXAMINE), deleted.
local function delete_threads_of(id)
  for _, tid in ipairs(redis.call('ZREVRANGE', keys.REST_THREADS, 0, MAX_EXAMINE - 1)) do
    local t = thread_record(tid)
    if t then
      local ok, md = pcall(cjson.decode, t.metadata or '{}')
      if ok and type(md) == 'table' and md.assistant_id == id then
        local r = active_run(tid)
        if r then send_cancel(r, 'interrupt') end
        delete_thread(tid)
      end
    end
  end
end

-- DELETE /assistants/:id[?delete_threads=true]: its record and versions (and its threads).
local function assistants_delete(c)
  local a = assistant_or_404(c)
  local id = a.assistant_id
  redis.call('DEL', keys.rest_assistant(id), keys.rest_assistant_versions(id))
  redis.call('ZREM', keys.REST_ASSISTANTS, id)
  if query1(c, 'delete_threads') == 'true' then delete_threads_of(id) end
  return { 200, '[' .. jstr(id) .. ']' }
end

-- A search's or count's filters as a test of an assistant record.
local function assistant_filter(b)
  for _, f in ipairs({ 'graph_id', 'name' }) do
    if not absent(b[f]) and type(b[f]) ~= 'string' then http(422, f .. ' must be a string') end
  end
  if not absent(b.metadata) and not is_object(b.metadata) then http(422, 'metadata must be an object') end
  local name = not absent(b.name) and string.lower(b.name)
  return function(a)
    return (absent(b.graph_id) or a.graph_id == b.graph_id)
      and (not name or string.find(string.lower(a.name or ''), name, 1, true) ~= nil)
      and (absent(b.metadata) or contains(cjson.decode(a.metadata or '{}'), b.metadata))
  end
end

-- Every assistant that passes matches (among the newest MAX_EXAMINE), the system ones made first.
local function matching_assistants(c, matches)
  system_assistants(c.now)
  local found = {}
  for _, id in ipairs(redis.call('ZREVRANGE', keys.REST_ASSISTANTS, 0, MAX_EXAMINE - 1)) do
    local a = assistant_record(id)
    if not a then
      redis.call('ZREM', keys.REST_ASSISTANTS, id)
    elseif matches(a) then
      found[#found + 1] = a
    end
  end
  return found
end

-- POST /assistants/search. Extra: the reference server's X-Pagination-Total
-- (and -Next when the count equals the limit).
local function assistants_search(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local limit, offset = paging(b)
  local matches = assistant_filter(b)
  local sort_by, order = sorting(b, ASSISTANT_SORTS, '"assistant_id", "graph_id", "name", "created_at" or "updated_at"')
  local fields
  if not absent(b.select) then
    if not is_strings(b.select) then http(422, 'select must be an array of field names') end
    local want = {}
    for _, f in ipairs(b.select) do want[f] = true end
    fields = {}
    for _, f in ipairs(ASSISTANT_FIELDS) do if want[f] then fields[#fields + 1] = f end end
  end
  local found = matching_assistants(c, matches)
  local num = sort_by == 'created_at' or sort_by == 'updated_at'
  table.sort(found, function(x, y)
    local p, q = x[sort_by] or '', y[sort_by] or ''
    if num then p, q = tonumber(p) or 0, tonumber(q) or 0 end
    if p == q then return x.assistant_id < y.assistant_id end
    if order == 'asc' then return p < q end
    return p > q
  end)
  local out = {}
  for i = offset + 1, math.min(#found, offset + limit) do out[#out + 1] = assistant_json(found[i], fields) end
  local total = #out > 0 and #found or 0
  local extra = '{"pagination_total":' .. (offset + total) .. '}'
  if total == limit then
    extra = '{"pagination_total":' .. (offset + total + 1) .. ',"pagination_next":' .. (offset + total) .. '}'
  end
  return { 200, '[' .. table.concat(out, ',') .. ']', extra }
end

-- POST /assistants/count
local function assistants_count(c)
  if not c.nobody then body_object(c) end
  return { 200, tostring(#matching_assistants(c, assistant_filter(c.body))) }
end

-- POST /assistants/:id/versions: newest first; metadata filters (containment).
local function assistants_versions(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  local limit, offset = paging(b)
  if not absent(b.metadata) and not is_object(b.metadata) then http(422, 'metadata must be an object') end
  local asked = path_id(c, 'assistant_id')
  local id = assistant_id_of(asked)
  if id ~= asked then system_assistant(asked, c.now) end
  local list = {}
  local h = #id <= 128 and redis.call('HGETALL', keys.rest_assistant_versions(id)) or {}
  for i = 1, #h, 2 do
    local v = members(h[i + 1])
    if absent(b.metadata) or contains(cjson.decode(v.metadata), b.metadata) then
      list[#list + 1] = { n = tonumber(h[i]), text = h[i + 1] }
    end
  end
  table.sort(list, function(x, y) return x.n > y.n end)
  local out = {}
  for i = offset + 1, math.min(#list, offset + limit) do out[#out + 1] = list[i].text end
  if #out == 0 then http(404, 'Assistant "' .. id .. '" not found.') end
  return { 200, '[' .. table.concat(out, ',') .. ']' }
end

-- POST /assistants/:id/latest {version}: the assistant becomes that version again.
local function assistants_latest(c)
  body_object(c)
  local n = c.body.version
  if not is_int(n, 1, 1e15) then http(422, 'version must be a positive integer') end
  local a = assistant_or_404(c)
  n = string.format('%d', n)
  local text = redis.call('HGET', keys.rest_assistant_versions(a.assistant_id), n)
  if not text then http(404, 'Assistant version not found') end
  local v = members(text)
  a.graph_id, a.name = cjson.decode(v.graph_id), cjson.decode(v.name)
  a.config, a.context, a.metadata = v.config, v.context, v.metadata
  a.description = v.description ~= 'null' and v.description or nil
  a.version, a.updated_at = n, c.now
  save_assistant(a, nil, c.now)
  return { 200, assistant_json(a) }
end

-- GET /assistants/:id/graph[?xray=]: what its graph's workers registered
-- (xray: the drawing with the subgraphs' insides, when they gave it; xray=n,
-- the drawing n levels deep, when they gave one for n (graph_xray_<n>, the
-- Python worker's: LangGraph's Python server draws n levels), else every level).
local function assistants_graph(c)
  local a = assistant_or_404(c)
  local xray = query1(c, 'xray')
  local deep = xray and xray ~= '' and xray ~= 'false' and xray ~= '0'
  local info = redis.call('HMGET', keys.ainfo(a.graph_id), 'graph', 'graph_xray')
  if deep and string.match(xray, '^[1-9][0-9]?$') then
    local at = redis.call('HGET', keys.ainfo(a.graph_id), 'graph_xray_' .. xray)
    if at then return { 200, at } end
  end
  return { 200, (deep and info[2]) or info[1] or '{}' }
end

local function assistants_schemas(c)
  local a = assistant_or_404(c)
  return { 200, redis.call('HGET', keys.ainfo(a.graph_id), 'schemas') or '{}' }
end

-- GET /assistants/:id/subgraphs[/:namespace][?recurse=]: from the subgraphs
-- its graph's workers registered ({"<ns>": schemas, "<ns>|<ns>": …}, parents
-- first), as LangGraph's getSubgraphs picks them: the top level, or every
-- level with recurse; with a namespace, only that one (a nested one needs recurse).
local function assistants_subgraphs(c)
  local a = assistant_or_404(c)
  local ns = c.path.namespace
  local recurse = query1(c, 'recurse')
  recurse = recurse == 'true' or recurse == '1'
  local text = worker_json(redis.call('HGET', keys.ainfo(a.graph_id), 'subgraphs'), true)
  if not text then return { 200, '{}' } end
  local vals, order = members(text)
  local out = {}
  for _, k in ipairs(order) do
    if (ns == nil or k == ns) and (recurse or not string.find(k, '|', 1, true)) then out[#out + 1] = k end
  end
  return { 200, object(out, vals) }
end

-- ---- the reference suite's wipe ----------------------------------------------------------

-- POST /internal/truncate {runs?, threads?, assistants?}: what the reference
-- server's test suite wipes between tests. A gateway serves the route only
-- with --test-truncate. Threads go with their runs; assistants but the
-- system ones; active runs are cancelled.
local function internal_truncate(c)
  if not c.nobody then body_object(c) end
  local b = c.body
  for _, f in ipairs({ 'runs', 'threads', 'assistants', 'store', 'checkpointer', 'checkpoint' }) do
    if not absent(b[f]) and type(b[f]) ~= 'boolean' then http(422, f .. ' must be true or false') end
  end
  if b.runs or b.threads then
    for _, tid in ipairs(redis.call('ZRANGE', keys.REST_THREADS, 0, -1)) do
      local r = active_run(tid)
      if r then send_cancel(r, 'interrupt') end
      if b.threads then
        delete_thread(tid)
      else
        for _, rid in ipairs(redis.call('ZRANGE', keys.rest_runs(tid), 0, -1)) do redis.call('DEL', keys.rest_run(rid)) end
        redis.call('DEL', keys.rest_runs(tid), keys.rest_queue(tid), keys.rest_active(tid))
      end
    end
  end
  if b.assistants then
    for _, id in ipairs(redis.call('ZRANGE', keys.REST_ASSISTANTS, 0, -1)) do
      local a = assistant_record(id)
      local md = a and cjson.decode(a.metadata or '{}')
      if not (a and type(md) == 'table' and md.created_by == 'system' and id == uuid5(GRAPH_NAMESPACE, a.graph_id)) then
        redis.call('DEL', keys.rest_assistant(id), keys.rest_assistant_versions(id))
        redis.call('ZREM', keys.REST_ASSISTANTS, id)
      end
    end
  end
  return { 200, '{"ok":true}' }
end

local REST_OPS = {
  ['threads.create'] = threads_create, ['threads.get'] = threads_get, ['threads.patch'] = threads_patch,
  ['threads.delete'] = threads_delete, ['threads.search'] = threads_search, ['threads.copy'] = threads_copy,
  ['runs.create'] = runs_create, ['runs.list'] = runs_list, ['runs.get'] = runs_get,
  ['runs.delete'] = runs_delete, ['runs.cancel'] = runs_cancel,
  ['run.started'] = run_started, ['run.finished'] = run_finished, ['run.adopted'] = run_adopted,
  ['threads.count'] = threads_count,
  ['assistants.create'] = assistants_create, ['assistants.get'] = assistants_get,
  ['assistants.patch'] = assistants_patch, ['assistants.delete'] = assistants_delete,
  ['assistants.search'] = assistants_search, ['assistants.count'] = assistants_count,
  ['assistants.versions'] = assistants_versions, ['assistants.latest'] = assistants_latest,
  ['assistants.graph'] = assistants_graph, ['assistants.schemas'] = assistants_schemas,
  ['assistants.subgraphs'] = assistants_subgraphs,
  ['internal.truncate'] = internal_truncate,
}

local function rest(KEYS, args)
  if KEYS[1] ~= keys.BRIDGE then fail('usage: FCALL threadcast_rest 1 ' .. keys.BRIDGE .. ' <op> <args-json>') end
  local op = args[1]
  local handler = op and REST_OPS[op]
  if not handler then fail('unknown op ' .. tostring(op) .. ' for threadcast_rest') end
  if type(args[2]) ~= 'string' then fail('args-json is required') end
  local c = request(args[2])
  local res = answered(handler, c)
  if c.flavor ~= c.given then -- the gateway answers (errors) as this server does
    res[3] = merge(res[3] or '{}', '{"flavor":' .. jstr(c.flavor) .. '}')
  end
  return res
end

redis.register_function('threadcast_rest', guarded(rest))
