"""How the real-engine suite runs a rendered prefill or decode container on this machine: the
rendered arguments and environment, with the changes a CPU and a machine without the Hub need, each
made here and only here (docs/real-vllm.md lists them):

1. the model: the rendered first argument names the endpoint's model on the Hub, which is not
   reachable here; the tiny model's directory stands in (tests/vllm/tiny_model.py), and
   ``--served-model-name`` keeps the rendered name, so clients ask for what they would ask for;
2. the entrypoint: the image's ``vllm serve`` (vllm/vllm-openai's ENTRYPOINT), the suite's
   virtualenv's ``vllm`` script;
3. ``status.podIP`` (``VLLM_HOST_IP``, where the connector says it listens): the pod's address on
   the suite's pod network (tests/vllm/pods.py), as the kubelet fills it in;
4. the CPU backend's KV cache: ``VLLM_CPU_KVCACHE_SPACE`` GiB of memory (on a GPU it is the rest of
   the device's memory); ``--enforce-eager``, so a server starts without compiling its graphs;
   ``VLLM_CPU_OMP_THREADS_BIND=nobind``: vLLM's automatic binding binds each server's worker, and
   with it the Mooncake transfer engine's threads, to the same cores (vllm/utils/ompmultiprocessing.py,
   ``OMP_PLACES`` of ``_get_autobind_cpu_ids``); with several servers on this machine's two, a prefill
   and a decode sharing one transfer starved each other for minutes;
5. ``torch.accelerator`` and ``torch.cuda.Event`` on a CUDA build of torch without a GPU, the AMX tile
   state requested on a CPU that has it (the CPU attention uses it unasked), and
   0.33.0's MultiConnector metrics on 0.32.0 (a release difference): tests/vllm/cpu/sitecustomize.py,
   first on ``PYTHONPATH``;
6. a ConfigMap volume (mode ``both``'s mooncake.json): its files are written to a directory of the
   driver's, and a rendered variable naming a file under the volume's mount path names it there.

Anything else rendered goes to the server as rendered; a flag or variable the CPU build does not
know stops it at start, which the suite reports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CPU_DIRECTORY = Path(__file__).resolve().parent / "cpu"
KV_CACHE_GIB = 1
CPU_ARGUMENTS = ("--enforce-eager",)
CPU_ENVIRONMENT = {"VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB), "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def engine_process(
    container: Mapping[str, Any],
    *,
    venv: Path,
    model: Path,
    pod_address: str,
    secrets: Mapping[str, str],
    mounts: Mapping[str, Path] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment a pod with ``container`` runs, here; ``mounts``: where the
    files of each volume the container mounts (by volume name) are."""
    assert container.get("command") is None, "the vLLM image's entrypoint runs the rendered arguments"
    args = [str(a) for a in container["args"]]
    served = args[args.index("--served-model-name") + 1]
    assert args[0] == served, f"the rendered model {args[0]!r} is its served name {served!r}"
    argv = [str(venv / "bin" / "vllm"), "serve", str(model), *args[1:], *CPU_ARGUMENTS]
    env = {
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/root"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(CPU_DIRECTORY),
        **CPU_ENVIRONMENT,
    }
    mounted = {
        m["mountPath"]: (mounts or {})[m["name"]]
        for m in container.get("volumeMounts", [])
        if m["name"] in (mounts or {})
    }
    for variable in container.get("env", []):
        value = _value(variable, pod_address, secrets)
        for path, directory in mounted.items():
            if value.startswith(f"{path.rstrip('/')}/"):
                value = str(directory / value.removeprefix(f"{path.rstrip('/')}/"))
        env[variable["name"]] = value
    return argv, env


def _value(variable: Mapping[str, Any], pod_address: str, secrets: Mapping[str, str]) -> str:
    if "value" in variable:
        return str(variable["value"])
    source = variable["valueFrom"]
    if source.get("fieldRef", {}).get("fieldPath") == "status.podIP":
        return pod_address
    if "secretKeyRef" in source:
        reference = source["secretKeyRef"]
        return secrets[f"{reference['name']}/{reference['key']}"]
    raise AssertionError(f"no value here for {variable['name']}: {source}")
