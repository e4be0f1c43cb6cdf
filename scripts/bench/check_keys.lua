-- wrk script for the service's throughput runs: POST /v1/check with JSON
-- bodies, keys spread uniformly over KEYS identities (default 10000), each
-- limited to MAX per WINDOW_MS (defaults 1,000,000 per 60,000 ms: every
-- check admits and records). Unlike http_check.lua it defines no
-- response() hook: with one, wrk hands every answer's headers and body to
-- Lua, a client cost that grows with the answer's header fields, and the
-- client shares the machine's 2 cores with the server. wrk still reports
-- any answer that is not 2xx ("Non-2xx or 3xx responses").
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local keys = tonumber(os.getenv("KEYS") or "10000")
local max = os.getenv("MAX") or "1000000"
local window = os.getenv("WINDOW_MS") or "60000"

function setup(thread)
  thread:set("seed", math.random(1, 1000000))
end

function init(args)
  math.randomseed(os.time() + seed)
end

function request()
  return wrk.format(nil, nil, nil,
    '{"key":"bench:' .. math.random(keys) .. '","max":' .. max .. ',"window_ms":' .. window .. '}')
end
