#!lua name=threadcast_store
--
-- threadcast's Redis functions, second of three libraries: the Agent
-- Protocol's store. It begins with the shared prelude of threadcast.lua (key
-- names, errors, the clock, JSON text and HTTP answers), which the build puts
-- right after this line; so assembled, it loads alone (scripts/embed.py
-- --library prints it).

-- ==== threadcast_store: the Agent Protocol store (/store/*) ============================
--
--   FCALL threadcast_store 1 {tc:store} <op> <args-json>   -> {status, body-json}
--
-- The gateway turns each /store request into one call: op is store.put,
-- store.get, store.delete, store.search or store.namespaces (and
-- store.truncate, for a test-only route); args-json is
-- {"query": {...strings...}, "body": <parsed JSON body or null>, "now": ms?, "flavor":
-- "python"? (a search's items then carry the Python server's "score": null)}.
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
  redis.call('DEL', keys.store_item(member))
  redis.call('ZREM', keys.STORE_EXPIRY, member)
  if redis.call('ZREM', keys.STORE_ITEMS, member) == 1 then
    local enc = string.match(member, '^([^\n]*)\n')
    if redis.call('HINCRBY', keys.STORE_NSCOUNT, enc, -1) <= 0 then
      redis.call('HDEL', keys.STORE_NSCOUNT, enc)
      redis.call('ZREM', keys.STORE_NS, enc)
    end
  end
end

local function store_sweep(now)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', keys.STORE_EXPIRY, '-inf', now, 'LIMIT', 0, STORE_SWEEP)) do
    store_remove(member)
  end
end

local ITEM_FIELDS = { 'namespace', 'key', 'value', 'created_at', 'updated_at', 'ttl', 'expires_at' }

-- The item's fields (as ITEM_FIELDS), or nil when it is absent or expired
-- (then it leaves the indexes, if it was still in them).
local function store_load(member, now)
  local h = redis.call('HMGET', keys.store_item(member), unpack(ITEM_FIELDS))
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
  redis.call('HSET', keys.store_item(member), 'expires_at', at)
  redis.call('PEXPIREAT', keys.store_item(member), at)
  redis.call('ZADD', keys.STORE_EXPIRY, at, member)
end

-- Serves a read: the item's JSON, its TTL refreshed when asked. scored: a search's item as the
-- Python server answers it, with its score (null: no query embeds here).
local function item_json(member, h, now, refresh, scored)
  if refresh and h[6] then set_expiry(member, now + ttl_ms(tonumber(h[6]))) end
  return '{"namespace":' .. h[1] .. ',"key":' .. cjson.encode(h[2]) .. ',"value":' .. h[3] ..
         ',"created_at":"' .. iso(tonumber(h[4])) .. '","updated_at":"' .. iso(tonumber(h[5])) .. '"' ..
         (scored and ',"score":null}' or '}')
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
  local hk = keys.store_item(member)
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
    redis.call('ZREM', keys.STORE_EXPIRY, member)
  end
  if redis.call('ZADD', keys.STORE_ITEMS, 0, member) == 1 then
    redis.call('HINCRBY', keys.STORE_NSCOUNT, enc, 1)
    redis.call('ZADD', keys.STORE_NS, 0, enc)
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
  if not h then return { 200, 'null' } end -- as the reference server (the SDK's getItem gives null)
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
  local scored = a.flavor == 'python' -- (the gateway's --rest-flavor: the store belongs to no graph)
  store_sweep(now)
  local out, matched, budget = {}, 0, STORE_MAX_SCAN
  local function visit(member)
    local h = store_load(member, now)
    if h and (not filter or filter_holds(filter, h[3])) then
      matched = matched + 1
      if matched > offset then out[#out + 1] = item_json(member, h, now, refresh, scored) end
    end
    return #out >= limit
  end
  for _, range in ipairs(prefix_ranges(encode_ns(prefix))) do
    if #out >= limit then break end
    budget = scan_lex(keys.STORE_ITEMS, range[1], range[2], budget, visit)
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
    scan_lex(keys.STORE_NS, '-', '+', budget, visit)
  else
    if redis.call('ZSCORE', keys.STORE_NS, enc) then
      visit(enc)
      budget = budget - 1
    end
    scan_lex(keys.STORE_NS, '[' .. enc .. '/', '(' .. enc .. '0', budget, visit)
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

-- Every item gone (POST /internal/truncate, which a gateway serves only with
-- --test-truncate: the reference server's test suite wipes the store with it).
local function store_truncate()
  while true do
    local chunk = redis.call('ZRANGEBYLEX', keys.STORE_ITEMS, '-', '+', 'LIMIT', 0, STORE_CHUNK)
    if #chunk == 0 then break end
    for _, member in ipairs(chunk) do redis.call('DEL', keys.store_item(member)) end
    redis.call('ZREM', keys.STORE_ITEMS, unpack(chunk))
  end
  redis.call('DEL', keys.STORE_NS, keys.STORE_NSCOUNT, keys.STORE_EXPIRY)
  return { 200, '{"ok":true}' }
end

local STORE_OPS = { ['store.put'] = store_put, ['store.get'] = store_get, ['store.delete'] = store_delete,
                    ['store.search'] = store_search, ['store.namespaces'] = store_namespaces,
                    ['store.truncate'] = store_truncate }

local function store_call(KEYS, args)
  if KEYS[1] ~= keys.STORE then fail('threadcast_store takes the one key ' .. keys.STORE) end
  local op = STORE_OPS[args[1] or '']
  if not op then
    fail('unknown store op "' .. tostring(args[1]) .. '" (expected store.put, store.get, store.delete, ' ..
         'store.search, store.namespaces or store.truncate); usage: FCALL threadcast_store 1 {tc:store} <op> <args-json>')
  end
  local raw = args[2] or ''
  local ok, a = pcall(cjson.decode, raw)
  if not ok or not is_json_object(a) then fail('args must be a JSON object') end
  local now = a.now
  if type(now) == 'number' and now >= 0 then now = math.floor(now) else now = now_ms() end
  return answered(op, a, raw, now)
end

redis.register_function('threadcast_store', guarded(store_call))
