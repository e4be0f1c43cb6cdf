-- wrk script for slidelog's HTTP service: POST /v1/check with JSON bodies,
-- keys spread uniformly over KEYS identities (default 10000), each limited
-- to MAX per WINDOW_MS (defaults 1000 per 60,000 ms, so most decisions admit
-- and append). KEYS=1 is the hot-key workload (scripts/bench/hot_key.sh:
-- one key, MAX=100 per WINDOW_MS=1000, ~99% rejected at thousands a second).
-- Counts 200 / 429 / other answers per thread and prints them at the end.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local keys = tonumber(os.getenv("KEYS") or "10000")
local max = os.getenv("MAX") or "1000"
local window = os.getenv("WINDOW_MS") or "60000"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  math.randomseed(os.time() * 1000 + id)
  ok, limited, other = 0, 0, 0
end

local function body(key)
  return '{"key":"' .. key .. '","max":' .. max .. ',"window_ms":' .. window .. '}'
end

if keys == 1 then
  -- One key: a fixed body, so wrk builds the request once.
  wrk.body = body("hot")
else
  function request()
    return wrk.format(nil, nil, nil, body("bench:" .. math.random(keys)))
  end
end

function response(status, headers, body)
  if status == 200 then ok = ok + 1
  elseif status == 429 then limited = limited + 1
  else other = other + 1 end
end

function done(summary, latency, requests)
  local a, l, o = 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("ok"); l = l + t:get("limited"); o = o + t:get("other")
  end
  io.write(string.format("answers: 200=%d 429=%d other=%d\n", a, l, o))
  io.write(string.format("p50=%.3fms p90=%.3fms p99=%.3fms max=%.3fms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000))
end
