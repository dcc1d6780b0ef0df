-- Argo CD health check for kafka-rebalance.io/ConsumerGroupPolicy.
--
-- Install it under argocd-cm's key
--   resource.customizations.health.kafka-rebalance.io_ConsumerGroupPolicy
-- (docs/install.md). Argo CD runs it with gopher-lua (Lua 5.1 semantics); the project's tests run
-- it with Lua 5.1 and 5.4 against status objects the operator wrote on a real API server
-- (tests/unit/ship/test_argocd_health.py).
--
-- It reads the kstatus conditions the operator writes (Ready, Reconciling, Stalled), and gives
-- the same verdict as kstatus: a spec the operator has not processed yet is Progressing, Stalled
-- is Degraded, Reconciling is Progressing, Ready is Healthy.

local function describe(c)
  return (c.reason or "") .. ": " .. (c.message or "")
end

local hs = {status = "Progressing", message = "waiting for the operator"}
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= nil
    and obj.status.observedGeneration ~= generation then
  return {status = "Progressing", message = "the operator has not processed the latest spec yet"}
end
for _, c in ipairs(obj.status.conditions) do
  if c.observedGeneration ~= nil and generation ~= nil and c.observedGeneration < generation then
    return hs
  end
  if c.type == "Stalled" and c.status == "True" then
    return {status = "Degraded", message = describe(c)}
  end
  if c.type == "Reconciling" and c.status == "True" then
    return {status = "Progressing", message = describe(c)}
  end
end
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" and c.status == "True" then
    return {status = "Healthy", message = describe(c)}
  end
end
return hs
