-- Shared by every wrk run of benchmarks/http/run.py: prints one machine-readable
-- line ("WRKJSON {...}") with wrk's own summary, error counters and latency
-- percentiles (microseconds). Loaded with -s for plain runs, and included by
-- pipeline.lua. Defines no request() function, so a plain run stays a static
-- request (no Lua call per request on the client side).
--
-- WRK_COUNT_RESPONSES=1 also installs a response() callback counting every
-- response on the client side ("counted"), to cross-check wrk's "requests"
-- (it slows the client down: use it for checks, not for measurements).

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

if os.getenv("WRK_COUNT_RESPONSES") == "1" then
   responses = 0
   function response(status, headers, body)
      responses = responses + 1
   end
end

-- Latency percentiles are wrk's own (what --latency prints), coordinated-omission
-- corrected by wrk. wrk 4.1's percentile() scans its histogram from latency.min
-- only and returns 0 when the correction put samples below it (seen with
-- pipelining); run.py treats a 0 as "not available".
function done(summary, latency, requests)
   local counted = -1
   if os.getenv("WRK_COUNT_RESPONSES") == "1" then
      counted = 0
      for _, t in ipairs(threads) do
         counted = counted + (t:get("responses") or 0)
      end
   end
   local p = {latency:percentile(50), latency:percentile(90), latency:percentile(99)}
   local e = summary.errors
   io.write(string.format(
      'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
      '"lat_mean_us":%.1f,"lat_p50_us":%d,"lat_p90_us":%d,"lat_p99_us":%d,"lat_max_us":%d,' ..
      '"pipeline":%d,"counted":%d}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.mean, p[1], p[2], p[3], latency.max,
      tonumber(os.getenv("WRK_PIPELINE") or "1") or 1, counted))
end
