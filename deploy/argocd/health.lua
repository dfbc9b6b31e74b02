-- Argo CD health check for egressproxy.io/EgressProxyPolicy.
-- Install: argocd-cm, key resource.customizations.health.egressproxy.io_EgressProxyPolicy.
-- Reads the conditions kstatus reads: Ready, Reconciling, Stalled, and observedGeneration.
local hs = {}

local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function message(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = message(stalled, "Stalled")
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message(ready, "Ready")
  return hs
end

local reconciling = condition("Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = message(reconciling, "Reconciling")
  return hs
end

if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = message(ready, "Not ready")
  return hs
end

hs.status = "Progressing"
hs.message = "Waiting for the Ready condition"
return hs
