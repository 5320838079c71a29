"""GitHub webhooks: verify a delivery, turn its event into marked pull requests, refresh them.

One module per concern, in the order a delivery meets them:
signature.py (the HMAC check), events.py (an event payload -> marks, pure), deliveries.py
(a delivery seen before, by id or by body), receiver.py (one delivery: verify, de-duplicate,
mark), route.py (the HTTP edge, `POST /webhook`), inbox.py (the marks until the debounced
refresh takes them), shared.py (several replicas: marks left in the state for their holder),
budget.py (the refreshes' share of GitHub's points), refresh.py (the batched re-read handed
to the cycle's code), job.py (the debounced refresh job on the service's worker), wiring.py
(what they run on, typed) and service.py (`Webhooks`: all of it, wired as `run` wires it).
"""
