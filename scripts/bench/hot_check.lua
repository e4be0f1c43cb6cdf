-- wrk script for the hot-key workload: every request is POST /v1/check on
-- ONE key limited to MAX per WINDOW_MS (defaults 100 per 1,000 ms), so at
-- thousands of requests per second about 99% are rejected. Prints the
-- answers and the latency percentiles.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"key":"hot","max":' .. (os.getenv("MAX") or "100") ..
  ',"window_ms":' .. (os.getenv("WINDOW_MS") or "1000") .. '}'
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  ok, limited, other = 0, 0, 0
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
  io.write(string.format("p50=%.3fms p99=%.3fms max=%.3fms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
