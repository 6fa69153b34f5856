"""The front of an endpoint: the prefill/decode proxy of a split Mooncake endpoint (modes
``disaggregated`` and ``both``), and, with ``--forward``, the gate in front of a classic endpoint's
server that may scale to zero.

This package is a program of its own, not part of the Pulumi program, which never imports it:
``components/render/proxy.py`` puts its files into the ConfigMap ``<name>-proxy`` (``<name>-gate``)
and those pods run it with ``python3`` from the endpoint's image. It needs only the standard library
and aiohttp, which the vLLM image carries (vLLM's requirements/common.txt), as does SGLang's (its
wheel requires aiohttp); ``kv_events`` also msgspec and pyzmq, which vLLM's image carries too, and no
other module imports it. docs/front.md is its page.

Its modules, each one seam:

- ``watch``: the backends and how they are probed (DNS, ``/health``, the bootstrap servers' ``/query``);
- ``proxy``: the proxy's request path (prefill, then decode with the prefilling engine's address);
- ``gate``: every request forwarded as it came to one server;
- ``base``: what both share (``/health``, ``/metrics``, the counts, the answer while at zero);
- ``relay``: sending, forwarding and streaming answers back, and the errors the front answers;
- ``refusals``: what a draining engine answers instead of running a request, read before the client gets it;
- ``metrics``: the counts and their Prometheus exposition;
- ``router``: routing in the request path (``--routing``), by ``routing``'s policies;
- ``routing``: routing policies (which backend takes a request), pure, simulated in benchmarks/routing;
- ``engine_caches``: what each engine's prefix cache holds as its KV events tell (the precise mode's state);
- ``kv_events``: vLLM's KV events off the wire, decoded and followed (msgspec and pyzmq: vLLM's image only);
- ``serve``: the arguments, the applications on the two ports, the drain on SIGTERM.

``/health`` is 200 only while the front can serve (at least one prefill engine and the decode
Service, or the gate's server; or only backends that may be at zero are missing), so Kubernetes and
the load balancer take a front that cannot serve out of rotation. Its body says how many engines
serve, not where (the metrics port's ``/health`` names the pods and engine ids), and how many
requests this process answered (``answered``), which ``fleetctl verify`` reads to measure a canary
set's share.

Scale to zero (docs/mooncake-proxy.md): the backends named by ``--scale-to-zero`` may have no pod at
all, their autoscaler waking them on the requests this front counts. While every missing backend is
one of them, ``/health`` stays 200 (the front must stay in rotation to see the demand) and names them
under ``scaled_to_zero``, and a request is answered at once with 503, ``Retry-After`` and the error
type ``scaled_to_zero``. A missing backend not named there leaves ``/health`` at 503 and the
requests with 503s. SIGTERM drains (``serve.serve``).
"""
