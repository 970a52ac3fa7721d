-- wrk script: POSTs the multipart body in $UPLOAD_BODY (a file) with the
-- Content-Type in $UPLOAD_TYPE; prints a WRKJSON summary line like report.lua.
local f = assert(io.open(os.getenv("UPLOAD_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = os.getenv("UPLOAD_TYPE")

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "bytes": %d, "connect": %d, "read": %d, ' ..
    '"write": %d, "status": %d, "timeout": %d, "p50_ms": %.3f, "p99_ms": %.3f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
