-- threadcast-agent's per-thread state transitions, atomic in Redis so several
-- agents can share one thread's work. KEYS[1] = tc:{T}:agent (hash),
-- KEYS[2] = tc:{T}:agent:ckpts (list of checkpoint summaries, oldest first).
-- ARGV[1] is the operation.
local h, ck, op = KEYS[1], KEYS[2], ARGV[1]
local st = redis.call('HGET', h, 'status')
local function touch()
  redis.call('EXPIRE', h, 86400)
  redis.call('EXPIRE', ck, 86400)
end
if op == 'start' or op == 'fork' then
  -- ARGV: op, run_id, query, ask, owner[, checkpoint_id]
  if op == 'fork' then
    local found = false
    for _, c in ipairs(redis.call('LRANGE', ck, 0, -1)) do
      if string.find(c, '"id":"' .. ARGV[6] .. '"', 1, true) then found = true end
    end
    if not found then return { 'no_checkpoint' } end
  end
  if st == 'running' then return { 'running', redis.call('HGET', h, 'run_id') } end
  if st == 'interrupted' and op == 'start' then
    -- run.start on an interrupted run resumes it with the input as the value
    redis.call('HSET', h, 'status', 'running', 'response', ARGV[3], 'owner', ARGV[5])
    touch()
    return { 'resumed', redis.call('HGET', h, 'run_id'), redis.call('HGET', h, 'query'),
             redis.call('HGET', h, 'ask'), redis.call('HGET', h, 'phase'), ARGV[3] }
  end
  redis.call('HSET', h, 'status', 'running', 'run_id', ARGV[2], 'query', ARGV[3], 'ask', ARGV[4],
             'phase', 0, 'response', '', 'interrupt_id', '', 'owner', ARGV[5])
  touch()
  return { 'started', ARGV[2] }
elseif op == 'resume' then
  -- ARGV: op, interrupt_id ('' = any), response, owner
  if st ~= 'interrupted' then return { 'none' } end
  if ARGV[2] ~= '' and redis.call('HGET', h, 'interrupt_id') ~= ARGV[2] then return { 'mismatch' } end
  redis.call('HSET', h, 'status', 'running', 'response', ARGV[3], 'owner', ARGV[4])
  touch()
  return { 'resumed', redis.call('HGET', h, 'run_id'), redis.call('HGET', h, 'query'),
           redis.call('HGET', h, 'ask'), redis.call('HGET', h, 'phase'), ARGV[3] }
elseif op == 'pause' then
  -- ARGV: op, phase, interrupt_id
  redis.call('HSET', h, 'status', 'interrupted', 'phase', ARGV[2], 'interrupt_id', ARGV[3])
  touch()
  return { 'ok' }
elseif op == 'finish' then
  redis.call('HSET', h, 'status', 'completed')
  touch()
  return { 'ok' }
elseif op == 'state' then
  return { st or 'idle', redis.call('HGET', h, 'values') or '{}', redis.call('LINDEX', ck, -1) or '' }
elseif op == 'record' then
  -- ARGV: op, values-json or '', checkpoint-json or ''
  if ARGV[2] ~= '' then redis.call('HSET', h, 'values', ARGV[2]) end
  if ARGV[3] ~= '' then redis.call('RPUSH', ck, ARGV[3]) end
  touch()
  return { 'ok' }
end
return redis.error_reply('ERR agent state: unknown operation ' .. tostring(op))
