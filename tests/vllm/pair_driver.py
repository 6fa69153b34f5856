"""Runs inside a private network and mount namespace (``unshare -n -m``): a real vLLM prefill and
decode (the CPU build, tests/vllm/adaptations.py) started with the arguments and environment the
plan renders for a split endpoint, each in a pod namespace of its own (tests/vllm/pods.py), the
rendered proxy program in front of them as its pod runs it, and the scenarios of
tests/vllm/test_real_pair.py against them; prints what each saw as one JSON object.

One pair serves every scenario (starting a server costs minutes here). A second prefill pod starts
beside the first at once, out of the Service until the rollout scene takes it in; for the store scene
(mode ``both``) it is in the Service from the start, and the store's master runs in a pod of its own
under its Service's name.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetctl.verify.evidence import store_puts
from tests.vllm.adaptations import engine_process
from tests.vllm.client import Answer, healthy, metric, request, wait_until
from tests.vllm.pods import Pod, PodNetwork

START_SECONDS = 900.0
"""A server's start here: imports of torch and vLLM in three processes, on two shared cores (measured
2-4 minutes; the bound leaves room for three starting at once)."""
RECOVERY_SECONDS = 60.0
PROMPT = "the prefill of a long prompt hands its cache to the decode, which answers the client " * 6
CHAT = [{"role": "user", "content": "what does the proxy send the decode after the prefill"}]
SCENES = ("answers", "eos_first", "min_tokens", "fanned_out", "standins", "rollout", "decode_restart")
HITS = "vllm:external_prefix_cache_hits_total"
"""Prompt tokens a server took from its KV connector instead of computing them (vllm/v1/metrics/loggers.py)."""
PROMPT_TOKENS = "vllm:prompt_tokens_total"
"""Prompt tokens a server was asked to process (vllm/v1/metrics/loggers.py): which prefill served a request."""
STORE_PROMPT = "the store keeps what one prefill computed for another prefill to load instead " * 6
PUT_SECONDS = 60.0
"""Until the master's admin summary (every 10 s) counts the first prefill's put."""


class Scene:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.logs = Path(spec["logs"])
        self.net = PodNetwork(self.logs)
        self.key = spec["api_key"]
        self.model = spec["served_model"]
        self.results: dict[str, Any] = {}

    # --- pods -------------------------------------------------------------------------------
    def engine(self, role: str, name: str) -> Pod:
        pod = self.net.pod(name)
        self.start_engine(pod, role)
        return pod

    def start_engine(self, pod: Pod, role: str) -> None:
        """The rendered ``role`` server's container started in ``pod`` (again, after a crash)."""
        argv, env = engine_process(
            self.spec[role],
            venv=Path(self.spec["venv"]),
            model=Path(self.spec["model"]),
            pod_address=pod.address,
            secrets=self.spec["secrets"],
            mounts={name: Path(path) for name, path in self.spec.get("mounts", {}).items()},
        )
        self.net.start(pod, argv, env)

    def url(self, pod: Pod, port: int | None = None) -> str:
        return f"http://{pod.address}:{port or self.spec['port']}"

    def ready(self, pod: Pod) -> float:
        def up() -> bool:
            if pod.exited() is not None:
                raise AssertionError(f"{pod.name} exited {pod.exited()}: {tail(pod)}")
            return healthy(self.url(pod))

        return wait_until(up, f"{pod.name} serving", START_SECONDS, every=2)

    def master(self) -> Pod:
        """The store's master, as its StatefulSet's container runs it, under its Service's name."""
        pod = self.net.pod("store")
        self.net.start(pod, self.spec["master_argv"], {"PATH": self.spec["path"]})
        self.net.name(self.spec["master_host"], [pod])
        return pod

    def proxy(self) -> Pod:
        pod = self.net.pod("proxy")
        env = {"PATH": self.spec["path"], **self.spec["proxy_env"]}
        self.net.start(pod, self.spec["proxy_argv"], env)
        return pod

    def proxy_url(self) -> str:
        return self.url(self.pods["proxy"], self.spec["proxy_port"])

    # --- requests ---------------------------------------------------------------------------
    def completion(self, url: str, **fields: Any) -> Answer:
        body = {"model": self.model, "prompt": PROMPT, "max_tokens": 12, "temperature": 0, **fields}
        return request(f"{url}/v1/completions", body, key=self.key)

    def chat(self, url: str, **fields: Any) -> Answer:
        body = {"model": self.model, "messages": CHAT, "max_tokens": 12, "temperature": 0, **fields}
        return request(f"{url}/v1/chat/completions", body, key=self.key)

    def single(self, send: Callable[..., Answer], **fields: Any) -> Answer:
        """The same request to the decode server alone, its prefix cache salted so it computes every
        token itself: the non-disaggregated run the split answer must equal."""
        return send(self.url(self.pods["decode"]), cache_salt=f"single-{time.monotonic_ns()}", **fields)

    def pulled(self, send: Callable[..., Answer], **fields: Any) -> dict[str, Any]:
        """``send`` through the proxy, with the decode's count of tokens taken from the connector."""
        decode = self.url(self.pods["decode"])
        before = metric(decode, HITS)
        answer = send(self.proxy_url(), **fields)
        answer["external_tokens"] = metric(decode, HITS) - before
        answer["single"] = self.single(send, **fields)
        return answer

    # --- scenes -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        scenes = self.spec.get("scenes", SCENES)
        self.pods = {}
        if "master_argv" in self.spec:
            self.pods["master"] = self.master()
        self.pods |= {"prefill": self.engine("prefill", "prefill-a"), "decode": self.engine("decode", "decode")}
        if "rollout" in scenes or "store" in scenes:
            self.pods["next_prefill"] = self.engine("prefill", "prefill-b")
        self.pods["proxy"] = self.proxy()
        self.results["ready_seconds"] = max(self.ready(self.pods["prefill"]), self.ready(self.pods["decode"]))
        in_service = [self.pods["prefill"]]
        if "store" in scenes:
            self.ready(self.pods["next_prefill"])
            in_service.append(self.pods["next_prefill"])
        self.net.name(self.spec["prefill_service"], in_service)
        self.net.name(self.spec["decode_host"], [self.pods["decode"]])
        wait_until(lambda: healthy(self.proxy_url()), "proxy ready", RECOVERY_SECONDS)
        for name in scenes:
            self.results[name] = self.scene(getattr(self, name))
        self.results["seconds"] = time.monotonic() - started
        self.results["logs"] = {name: tail(pod, 6000) for name, pod in self.net.pods.items()}
        return self.results

    def scene(self, scene: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return scene()
        except Exception:  # the other scenes still run; the test names what failed
            return {"scene_failed": traceback.format_exc()}

    def answers(self) -> dict[str, Any]:
        return {
            "completion": self.pulled(self.completion),
            "completion_stream": self.pulled(self.completion, stream=True),
            "chat": self.pulled(self.chat),
            "chat_stream": self.pulled(self.chat, stream=True),
        }

    def eos_first(self) -> dict[str, Any]:
        """The prompt's most likely first token made EOS: vLLM's ``check_stop`` would finish a
        one-token prefill ``FINISHED_STOPPED`` and free the KV the decode then waits for."""
        bias = {str(self.spec["eos_id"]): 100}
        return {"split": self.pulled(self.completion, logit_bias=bias)}

    def min_tokens(self) -> dict[str, Any]:
        return {"split": self.pulled(self.completion, min_tokens=6, max_tokens=8)}

    def fanned_out(self) -> dict[str, Any]:
        proxy, decode = self.proxy_url(), self.url(self.pods["decode"])
        return {
            "n": self.completion(proxy, n=2),
            "prompt_list": self.completion(proxy, prompt=[PROMPT, PROMPT[:40]]),
            # vLLM refuses n > 1 at temperature 0 ("n must be 1 when using greedy sampling").
            "n_single": self.completion(decode, n=2, temperature=1.0, seed=7, cache_salt="fan"),
        }

    def prefill_request(self, url: str, **fields: Any) -> Answer:
        """A request shaped as the proxy's prefill request (front/proxy.py), straight to a prefill server."""
        transfer = {"do_remote_decode": True, "do_remote_prefill": False, "transfer_id": f"xfer-{time.monotonic_ns()}"}
        body = {"model": self.model, "prompt": PROMPT, "temperature": 0, "stream": False, "max_tokens": 1}
        body |= {"min_tokens": 1, "kv_transfer_params": transfer, **fields}
        body = {k: v for k, v in body.items() if v is not None}  # a field given None is left out
        return request(f"{url}/v1/completions", body, key=self.key, headers={"X-data-parallel-rank": "0"})

    def standins(self) -> dict[str, Any]:
        """The same requests to the real prefill and to tests/e2e/pd_standins.py's, which the proxy's
        other tests run against: what the proxy reads of each answer must agree. The stand-in's first
        token is EOS for its ``EOS_PROMPT``; the real one's where the request biases EOS."""
        pod = self.net.pod("standin-prefill")
        argv = [sys.executable, "-m", "tests.e2e.pd_standins", "prefill", "--host", pod.address]
        argv += ["--port", str(self.spec["port"]), "--bootstrap-port", str(self.spec["bootstrap_port"])]
        env = {"PATH": self.spec["path"], "PYTHONPATH": self.spec["checkout"], "STANDIN_API_KEY": self.key}
        self.net.start(pod, argv, env)
        wait_until(lambda: healthy(self.url(pod)), "the stand-in serving", RECOVERY_SECONDS)
        # The prefill the rollout does not drain: a prefill answered here keeps its KV for a decode that
        # never comes, and the engine holds it as work until VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT.
        probed = self.pods.get("next_prefill", self.pods["prefill"])
        self.ready(probed)
        real = self.url(probed)
        standin = self.url(pod)
        eos = {"logit_bias": {str(self.spec["eos_id"]): 100}, "min_tokens": None}
        sides = {
            "real": {
                "prefill": self.prefill_request(real),
                "eos_first": self.prefill_request(real, **eos),
                "min_over_max": self.prefill_request(real, min_tokens=6),
                "query": request(self.url(probed, self.spec["bootstrap_port"]) + "/query"),
                "models": request(f"{real}/v1/models", key=self.key),
                "models_unauthorized": request(f"{real}/v1/models"),
            },
            "standin": {
                "prefill": self.prefill_request(standin),
                "eos_first": self.prefill_request(standin, prompt=self.spec["standin_eos_prompt"], min_tokens=None),
                "min_over_max": self.prefill_request(standin, min_tokens=6),
                "query": request(self.url(pod, self.spec["bootstrap_port"]) + "/query"),
                "models": request(f"{standin}/v1/models", key=self.key),
                "models_unauthorized": request(f"{standin}/v1/models"),
            },
        }
        self.net.terminate(pod)  # drains as vLLM does: accepted, refused
        time.sleep(0.3)
        sides["standin"]["draining"] = self.prefill_request(standin)
        self.net.delete(pod)
        return sides

    def rollout(self) -> dict[str, Any]:
        """Prefill rolls as its Deployment does (a surge: the new pod ready first, then the old one
        deleted) under steady load; the old pod drains as rendered: out of the Service at once, its
        preStop sleep, then SIGTERM and vLLM's own drain (``--shutdown-timeout``)."""
        old, new = self.pods["prefill"], self.pods["next_prefill"]
        load = Load(lambda: self.completion(self.proxy_url(), max_tokens=4))
        load.start()
        time.sleep(3)
        self.ready(new)
        engines_before = self.engine_ids()
        self.net.name(self.spec["prefill_service"], [old, new])
        # The old pod's deletion comes once the new one is ready; the proxy finds the new one within a
        # refresh of its name, well inside the old one's preStop (40 s rendered against a 2 s refresh).
        # Here that refresh is held to have happened before the old one leaves the name, so a machine
        # too loaded to probe in time shows up as that, not as lost requests.
        wait_until(lambda: new.address in self.prefill_pods(), "the proxy lists the new prefill", RECOVERY_SECONDS)
        self.net.name(self.spec["prefill_service"], [new])  # the endpoints controller, at deletion
        time.sleep(self.spec["prestop_seconds"])
        self.net.terminate(old)
        time.sleep(2)
        draining = self.prefill_request(self.url(old))  # what the stand-in's drain imitates
        # The grace period runs from the deletion, the preStop's sleep included.
        grace_left = self.spec["grace_seconds"] - self.spec["prestop_seconds"]
        exit_code = old.process.wait(grace_left) if old.process else None
        drained = tail(old, 200_000)
        time.sleep(3)
        load.stop()
        self.pods["prefill"] = new
        return {
            **load.summary(),
            "old_exit": exit_code,
            "old_drained": "request processing complete" in drained,
            "old_force_killed": "force killing" in drained,
            "draining": draining,
            "engines_before": engines_before,
            "engines_after": self.engine_ids(),
            "after": self.pulled(self.completion),
        }

    def decode_restart(self) -> dict[str, Any]:
        """The decode's container crashes and the kubelet starts it again (same pod, same address)."""
        decode = self.pods["decode"]
        self.net.kill(decode)
        down = wait_until(lambda: not healthy(self.proxy_url()), "proxy unready without decode", RECOVERY_SECONDS)
        during = self.completion(self.proxy_url())
        self.start_engine(decode, "decode")
        self.ready(decode)
        back = wait_until(lambda: healthy(self.proxy_url()), "proxy ready again", RECOVERY_SECONDS)
        after = self.pulled(self.completion)
        return {"unready_seconds": down, "during": during, "ready_again_seconds": back, "after": after}

    def store(self) -> dict[str, Any]:
        """Mode ``both``: a prompt prefilled by one prefill and pulled by the decode point to point is put in
        the store by that prefill's store connector; the same prompt prefilled by the other prefill, whose
        own cache never saw it, is loaded from the store (its connector's hits: the point-to-point child
        of a prefill loads nothing) and pulled by the decode from that prefill."""
        prefills = {pod.name: pod for pod in (self.pods["prefill"], self.pods["next_prefill"])}
        wait_until(lambda: len(self.prefill_pods()) == 2, "the proxy lists both prefills", RECOVERY_SECONDS)

        def served() -> dict[str, Any]:
            def counts() -> dict[str, tuple[float, float]]:
                return {
                    name: (metric(self.url(pod), PROMPT_TOKENS), metric(self.url(pod), HITS))
                    for name, pod in prefills.items()
                }

            before = counts()
            answer = self.pulled(self.completion, prompt=STORE_PROMPT)
            after: dict[str, tuple[float, float]] = {}

            def counted() -> bool:
                after.update(counts())
                return any(after[name][0] > before[name][0] for name in prefills)

            wait_until(counted, "a prefill counting the prompt", 10)
            (prefill,) = [name for name in prefills if after[name][0] > before[name][0]]
            return answer | {"prefill": prefill, "prefill_external_tokens": after[prefill][1] - before[prefill][1]}

        first = served()
        master_log = self.pods["master"].log
        assert master_log is not None
        try:
            stored: float | None = wait_until(
                lambda: store_puts(master_log.read_text(errors="replace")), "put", PUT_SECONDS
            )
        except AssertionError:
            stored = None  # the test says so; the second prefill then finds nothing to load
        # The other prefill alone in the Service, so the proxy sends it the prompt whatever its routing.
        (other,) = [pod for name, pod in prefills.items() if name != first["prefill"]]
        self.net.name(self.spec["prefill_service"], [other])
        wait_until(
            lambda: list(self.prefill_pods()) == [other.address], "the proxy lists one prefill", RECOVERY_SECONDS
        )
        second = served()
        return {"first": first, "stored_seconds": stored, "second": second}

    def prefill_pods(self) -> dict[str, Any]:
        pods: dict[str, Any] = (self.engine_ids() or {}).get("prefill", {})
        return pods

    def engine_ids(self) -> Any:
        return request(f"http://{self.pods['proxy'].address}:{self.spec['metrics_port']}/health").get("json")


class Load:
    """Two clients sending one request after another until stopped, as steady traffic."""

    def __init__(self, send: Callable[[], Answer], clients: int = 2) -> None:
        self.send = send
        self.answers: list[Answer] = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(clients)]

    def client(self) -> None:
        while not self.stopping.is_set():
            self.answers.append(self.send())

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(300)

    def summary(self) -> dict[str, Any]:
        failed = [a for a in self.answers if a.get("status") != 200 or a.get("finish_reason") not in ("length", "stop")]
        return {"requests": len(self.answers), "failures": failed[:5], "failure_count": len(failed)}


def tail(pod: Pod, size: int = 3000) -> str:
    return pod.log.read_text(errors="replace")[-size:] if pod.log and pod.log.exists() else ""


def main() -> None:
    spec = json.loads(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    scene = Scene(spec)
    try:
        results = scene.run()
    finally:
        scene.net.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
