-- HTTP/1.1 pipelining for wrk: each write carries DEPTH requests (default 24,
-- or the WRK_PIPELINE environment variable) for the URL's path, built once
-- with wrk.format and concatenated.
--
-- How wrk counts this (src/wrk.c, checked): at start it parses the string
-- request() returns and sets the pipeline depth to the number of requests in
-- it; every parsed *response* increments the request counter
-- (on_message_complete), and the next batch is written only when all DEPTH
-- responses of the previous one arrived. So "requests" and "Requests/sec" are
-- responses received: no factor to apply. Status errors count only responses
-- with status > 399.
--
-- Latency, however, is recorded once per batch (write of the batch -> its last
-- response), and wrk's coordinated-omission correction assumes one request per
-- round trip (its expected interval is runtime / (requests / connections), DEPTH
-- times too short here), so it floods the histogram with synthetic samples:
-- wrk's pipelined latency percentiles are meaningless. run.py reports the mean
-- batch round trip instead, from Little's law: connections * DEPTH / (req/s).
--
-- run.py cross-checks the count once per run with WRK_COUNT_RESPONSES=1
-- (a response() callback counting responses client-side, see report.lua).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local depth = tonumber(os.getenv("WRK_PIPELINE") or "24") or 24
local batch

function init(args)
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, wrk.path)
   end
   batch = table.concat(r)
end

function request()
   return batch
end
