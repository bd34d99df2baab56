-- Tessera's Lua prelude: runs once when the interpreter is created, before any script.
-- It builds what Redis 7.0 builds in C (script_lua.c, eval.c): the `redis` table, the
-- error handler that adds the script's line to errors, Redis's pcall, and the protection
-- of globals and libraries. Lua 5.1 has no read-only tables (Redis patches its Lua for
-- them), so scripts see proxies: empty tables whose metatables read through to the real
-- ones and refuse writes with Redis's message.
--
-- Frames of this chunk are named "=tessera"; the error handler skips them so that an
-- error points at the script's line, as it does in Redis where these are C functions.

local internal, dbg = ...
local real = _G
local error, type, tostring, select, unpack, setmetatable, rawget, rawset, pcall, xpcall =
  error, type, tostring, select, unpack, setmetatable, rawget, rawset, pcall, xpcall
local loadstring, setfenv, ipairs, pairs, next = loadstring, setfenv, ipairs, pairs, next

-- Functions written in Rust return `true, results...` or `false, error`. These wrap them
-- in C functions (so that a script's `return f()` keeps its frame, as with Redis's C
-- functions) that raise the error: a message with the caller's position, as luaL_error
-- does (`checked`), or an error table as it is (`raising`, Redis's luaPushError +
-- lua_error).
local checked, raising = internal.checked, internal.raising

for name, lib in pairs(internal.libraries) do
  local wrapped = {}
  for key, value in pairs(lib) do
    if type(value) == 'function' then
      wrapped[key] = checked(value)
    else
      wrapped[key] = value
    end
  end
  real[name] = wrapped
end

-- redis.call and redis.pcall are C functions made in Rust (`run::register`): they run the
-- command and raise (call) or return (pcall) an error reply as Redis's error table. Like
-- setresp and acl_check below, they answer Redis's "can only be called inside a script
-- invocation" error when no script is running.
local redis = {}
redis.call = internal.call
redis.pcall = internal.pcall
redis.setresp = raising(internal.setresp)
redis.set_repl = raising(internal.set_repl)
function redis.replicate_commands()
  return true
end
function redis.breakpoint()
  return false
end
function redis.debug() end
redis.sha1hex = raising(internal.sha1hex)
redis.log = raising(internal.log)
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = internal.version
redis.REDIS_VERSION_NUM = internal.version_num

function redis.error_reply(...)
  local message = ...
  if select('#', ...) ~= 1 or type(message) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return internal.error_table(message)
end
function redis.status_reply(...)
  local message = ...
  if select('#', ...) ~= 1 or type(message) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = message }
end
redis.acl_check_cmd = raising(function(...)
  if select('#', ...) == 0 then
    return false, { err = 'ERR Please specify at least one argument for this redis lib call' }
  end
  local allowed, err = internal.acl_check(...)
  if err then
    return false, err
  end
  if allowed == nil then
    return false, { err = 'ERR Invalid command passed to redis.acl_check_cmd()' }
  end
  return true, allowed
end)
real.redis = redis

math.random = checked(internal.random)
math.randomseed = checked(internal.randomseed)

-- Redis's pcall: an error table from redis.call comes back as its message.
local lua_pcall = pcall
local function pcall_result(ok, ...)
  if ok then
    return true, ...
  end
  local err = ...
  if internal.killed then
    error(err, 0) -- a stopped script may not catch its way on
  end
  if type(err) == 'table' then
    local message = err.err
    if type(message) == 'string' or type(message) == 'number' then
      return false, message
    end
  end
  return false, err
end
real.pcall = function(f, ...)
  return pcall_result(lua_pcall(f, ...))
end
-- xpcall and coroutine.resume catch errors too: not once the script is to stop.
local function unless_killed(ok, ...)
  if not ok and internal.killed then
    error((...), 0)
  end
  return ok, ...
end
local lua_xpcall = xpcall
real.xpcall = function(f, handler)
  return unless_killed(lua_xpcall(f, handler))
end
local lua_resume = coroutine.resume
coroutine.resume = function(co, ...)
  return unless_killed(lua_resume(co, ...))
end

-- Redis's fixes to its Lua (`patches.rs` lists them). `unpack` counts its range without
-- overflow.
real.unpack = internal.unpack

-- Every chunk is read as text, as Redis's patched parser reads it: a binary chunk (Lua
-- bytecode, which can escape the sandbox) starts with ESC, which is no token, so a space
-- before it gives the same syntax error at the same place while no undump is tried. The
-- chunk's name is always an argument here, so the parser's copy of it is anchored.
local byte, concat = string.byte, table.concat
local function load_text(text, name)
  if byte(text, 1) == 27 then
    return loadstring(' ' .. text, name)
  end
  return loadstring(text, name)
end
-- A bad argument's message, as luaL_argerror words it (the C closure `checked` adds the
-- script's position).
local function argument_error(position, function_name, expected, ...)
  local got = select('#', ...) == 0 and 'no value' or type((...))
  return false,
    'bad argument #' .. position .. " to '" .. function_name .. "' (" .. expected .. ' expected, got ' .. got .. ')'
end
real.loadstring = checked(function(...)
  local text, name = ...
  local kind = type(text)
  if kind ~= 'string' and kind ~= 'number' then
    return argument_error(1, 'loadstring', 'string', ...)
  end
  text = tostring(text)
  if name == nil then
    name = text
  elseif type(name) ~= 'string' and type(name) ~= 'number' then
    return argument_error(2, 'loadstring', 'string', select(2, ...))
  end
  return true, load_text(text, tostring(name))
end)
-- load(reader [, name]): the pieces are read first, then loaded as one text. A reader's
-- error or a piece that is no string fails the load, as Lua's does.
real.load = checked(function(...)
  local reader, name = ...
  if type(reader) ~= 'function' then
    return argument_error(1, 'load', 'function', ...)
  end
  if name == nil then
    name = '=(load)'
  elseif type(name) ~= 'string' and type(name) ~= 'number' then
    return argument_error(2, 'load', 'string', select(2, ...))
  end
  local pieces = {}
  while true do
    local ok, piece = lua_pcall(reader)
    if not ok then
      if internal.killed then
        error(piece, 0) -- a stopped script may not catch its way on
      end
      return true, nil, piece
    end
    if piece == nil or piece == '' then
      break
    end
    if type(piece) == 'number' then
      piece = tostring(piece) -- a number is a string to Lua's reader
    elseif type(piece) ~= 'string' then
      return true, nil, 'reader function must return a string'
    end
    pieces[#pieces + 1] = piece
  end
  return true, load_text(concat(pieces), tostring(name))
end)

-- What Redis's Lua does not have.
real.loadfile, real.dofile, real.print, real.debug = nil, nil, nil, nil
real.getfenv, real.setfenv, real.newproxy = nil, nil, nil
real.module, real.require, real.package, real.os, real.io = nil, nil, nil, nil, nil

-- Redis's __redis__err__handler: turns any error into {err=…} with the script's
-- source and line.
local function error_handler(err)
  local level = 2
  local info = dbg.getinfo(level, 'nSl')
  while info and (info.what == 'C' or info.what == 'tail' or info.source == '=tessera') do
    level = level + 1
    info = dbg.getinfo(level, 'nSl')
  end
  if internal.killed then
    -- Stopped by SCRIPT KILL: the hook's error reaches here as an opaque value.
    err = { err = internal.killed_message }
  elseif type(err) ~= 'table' then
    err = { err = 'ERR ' .. tostring(err) }
  end
  if info then
    err.source = info.source
    err.line = info.currentline
  end
  return err
end

-- Scripts run under the error handler (`run::call_script`).
internal.error_handler = error_handler

-- Protection. A proxy reads through to its table and refuses every write.
local targets = setmetatable({}, { __mode = 'k' })
local function readonly()
  error('Attempt to modify a readonly table', 2)
end
local function proxy(target, index)
  local p = setmetatable({}, { __index = index or target, __newindex = readonly, __metatable = false })
  targets[p] = target
  return p
end

-- The raw functions and iteration see through a proxy to its table, as scripts expect of
-- Redis's read-only tables.
real.rawset = function(t, k, v)
  if targets[t] then
    error('Attempt to modify a readonly table', 0)
  end
  return rawset(t, k, v)
end
real.rawget = function(t, k)
  return rawget(targets[t] or t, k)
end
local lua_next = next
local function next_through(t, k)
  return lua_next(targets[t] or t, k)
end
real.next = next_through
local lua_pairs = pairs
real.pairs = function(t)
  if type(t) ~= 'table' then
    return lua_pairs(t)
  end
  return next_through, t, nil
end

local string_metatable = dbg.getmetatable('')
for _, name in ipairs({ 'string', 'math', 'table', 'coroutine', 'redis', 'cjson', 'cmsgpack', 'bit', 'struct' }) do
  if type(real[name]) == 'table' then
    real[name] = proxy(real[name])
  end
end

-- Strings' metatable is read-only too, and its __index (what `('x'):upper()` and
-- `getmetatable('').__index` reach) is the read-only `string`: scripts could otherwise
-- change the string library of every later script through it.
string_metatable.__index = real.string
string_metatable.__metatable = proxy(string_metatable)

-- setmetatable on a read-only table fails as Redis's does (its message has no position).
local lua_setmetatable = setmetatable
real.setmetatable = checked(function(...)
  local t, metatable = ...
  if type(t) ~= 'table' then
    return argument_error(1, 'setmetatable', 'table', ...)
  end
  if metatable ~= nil and type(metatable) ~= 'table' then
    return false, "bad argument #2 to 'setmetatable' (nil or table expected)"
  end
  if targets[t] or t == real then
    error('Attempt to modify a readonly table', 0)
  end
  local current = dbg.getmetatable(t)
  if current ~= nil and rawget(current, '__metatable') ~= nil then
    return false, 'cannot change a protected metatable'
  end
  return true, lua_setmetatable(t, metatable)
end)

-- Scripts' globals read through to the real ones with no function call (a table
-- __index); a name the real globals lack reaches their own __index, which refuses it as
-- Redis's does (level 2: the script's line). Nothing else reads a missing global from them:
-- the functions here use locals, and Lua's and mlua's C code read globals raw.
local globals = proxy(real)
setmetatable(real, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __metatable = false,
})
-- getmetatable(_G) hands out a read-only view of the globals' metatable, as Redis's
-- read-only metatable of its globals.
local globals_metatable = dbg.getmetatable(globals)
globals_metatable.__metatable = proxy(globals_metatable)
real._G = globals
internal.globals = globals
internal.real_globals = real

-- Compiles a script in the protected environment: the function, or nil and Lua's message.
function internal.compile(body)
  local f, message = load_text(body, '@user_script')
  if not f then
    return nil, message
  end
  setfenv(f, globals)
  return f
end

-- Function libraries (FUNCTION LOAD). A library's code runs once, when it is loaded, with
-- only a small `redis` (register_function, log, the versions) and nothing else, as in
-- Redis; the functions it registers run later with the globals scripts have. Both come
-- through one environment whose lookups depend on which of the two is happening.
local library_redis = {
  register_function = raising(function(...)
    local register = internal.register
    if not register then
      return false, { err = 'ERR redis.register_function can only be called on FUNCTION LOAD command' }
    end
    return register(...)
  end),
  log = redis.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = internal.version,
  REDIS_VERSION_NUM = internal.version_num,
}
local library_redis_proxy = proxy(library_redis, function(_, name)
  local value = rawget(library_redis, name)
  if value == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end
  return value
end)
local library_api = { redis = library_redis_proxy }
local library_env = proxy(library_api, function(_, name)
  local value
  if internal.loading_library then
    value = rawget(library_api, name)
  else
    value = rawget(real, name)
  end
  if value == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end
  return value
end)

-- Compiles and runs a library's code: true, or false and Redis's message.
function internal.load_library(body)
  local f, message = load_text(body, '@user_function')
  if not f then
    return false, 'Error compiling function: ' .. message
  end
  setfenv(f, library_env)
  internal.loading_library = true
  local ok, err = lua_pcall(f)
  internal.loading_library = nil
  if ok then
    return true
  end
  if internal.load_timed_out then
    err = { err = 'ERR FUNCTION LOAD timeout' }
  elseif type(err) ~= 'table' then
    err = { err = 'ERR ' .. tostring(err) }
  end
  return false, 'Error registering functions: ' .. tostring(err.err)
end
