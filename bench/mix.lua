-- The realistic mix: many clients, each with its own API key, paging through the list by cursor with
-- random status filters, looking pets up by id and adding some. bench/mix.ts writes the data file
-- (keys, request budgets, saved cursors, shares) that wrk passes as the first argument.
--
-- wrk's request() is not told which connection it fills, so the clients are kept here and take
-- turns over wrk's connections; each request carries X-Request-Id "m<client>.<seq>", which the
-- service echoes, so that response() can give each client the next page of its own walk.
-- Run with wrk -t1: one Lua state holds every client.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

-- Globals, so that done() can read them from the thread's state.
statuses = {}   -- HTTP status -> answers
kinds = {}      -- list, get, create -> answers matched to their client
unmatched = 0   -- answers whose X-Request-Id named no waiting request
walksEnded = 0  -- walks that reached the last page (no rel="next") and start over

local PET_STATUSES = { "available", "pending", "sold" }
local data, clients, turn, seq

function init(args)
  data = dofile(args[1])
  math.randomseed(tonumber(args[2]) or 1)
  clients = {}
  for i, c in ipairs(data.clients) do
    clients[i] = { auth = "Bearer " .. c.key, budget = c.budget, nextPath = c.bookmark }
  end
  turn, seq = 0, 0
end

-- A new walk: no filter or one status, the default limit or a larger one.
local function firstPage()
  local query = {}
  local pick = math.random(#PET_STATUSES + 1)
  if pick <= #PET_STATUSES then query[#query + 1] = "status=" .. PET_STATUSES[pick] end
  if math.random() < data.largePageShare then query[#query + 1] = "limit=50" end
  if #query == 0 then return "/v1/pets" end
  return "/v1/pets?" .. table.concat(query, "&")
end

function request()
  -- Clients on a small plan stop once their budget for this run is spent, which keeps them under
  -- their plan's per-minute limit; there are always clients with no budget (Enterprise).
  local c
  for _ = 1, #clients do
    turn = turn % #clients + 1
    c = clients[turn]
    if c.budget == nil or c.budget > 0 then break end
  end
  if c.budget then c.budget = c.budget - 1 end
  seq = seq + 1
  c.seq = seq
  local headers = { ["Authorization"] = c.auth, ["X-Request-Id"] = "m" .. turn .. "." .. seq }
  local r = math.random()
  if r < data.createShare then
    c.kind = "create"
    headers["Content-Type"] = "application/json"
    local body = string.format('{"name":"mix %d","categoryId":%d,"status":"%s"}', seq, math.random(1000000), PET_STATUSES[math.random(3)])
    return wrk.format("POST", "/v1/pets", headers, body)
  elseif r < data.createShare + data.getShare then
    c.kind = "get"
    return wrk.format("GET", "/v1/pets/" .. math.random(data.maxId), headers)
  end
  c.kind = "list"
  if c.nextPath == nil or math.random() < data.abandonShare then c.nextPath = firstPage() end
  return wrk.format("GET", c.nextPath, headers)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  local id = headers["x-request-id"] or headers["X-Request-Id"] or ""
  local i, s = string.match(id, "^m(%d+)%.(%d+)$")
  local c = i and clients[tonumber(i)]
  if c == nil or c.seq ~= tonumber(s) then
    unmatched = unmatched + 1
    return
  end
  kinds[c.kind] = (kinds[c.kind] or 0) + 1
  if c.kind == "list" and status == 200 then
    local link = headers["link"] or headers["Link"] or ""
    local nextUrl = string.match(link, '<([^>]*)>%s*;%s*rel="next"')
    if nextUrl then
      c.nextPath = (string.gsub(nextUrl, "^https?://[^/]+", ""))
    else
      c.nextPath = nil
      walksEnded = walksEnded + 1
    end
  end
end

function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do io.write("mix status ", k, " ", v, "\n") end
    for k, v in pairs(t:get("kinds")) do io.write("mix kind ", k, " ", v, "\n") end
    io.write("mix unmatched ", t:get("unmatched"), "\n")
    io.write("mix walks-ended ", t:get("walksEnded"), "\n")
  end
end
