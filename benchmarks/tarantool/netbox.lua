-- net.box reference client: FIBERS fibers share one connection, same workload.
-- usage: tarantool netbox.lua PORT N FIBERS
local port, n, nfib = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
local fiber = require('fiber')
local clock = require('clock')
local json = require('json')
local conn = require('net.box').connect('127.0.0.1:' .. port)
conn:eval('box.space.tester:truncate()')
local space = conn.space.tester
local printable = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'
local data = {}
for i = 1, #printable do data[i] = string.rep(printable:sub(i, i), 1536) end
local upd = string.rep('x', 1536)
local ops = {
    insert = function(i) space:insert({i, data[i % #data + 1]}) end,
    select = function(i) space:select(i) end,
    update = function(i) space:update(i, {{'=', 2, upd}}) end,
    delete = function(i) space:delete(i) end,
}
local out = {}
for _, phase in ipairs({'insert', 'select', 'update', 'delete'}) do
    local t0, c0 = clock.monotonic(), os.clock()
    local done = fiber.channel(nfib)
    for k = 0, nfib - 1 do
        fiber.create(function()
            for i = k, n - 1, nfib do ops[phase](i) end
            done:put(true)
        end)
    end
    for _ = 1, nfib do done:get() end
    out[phase] = {secs = clock.monotonic() - t0, cpu = os.clock() - c0}
end
print(json.encode(out))
os.exit(0)
