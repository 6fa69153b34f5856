"""Loaded first by every Python process of the real-engine suite's vLLM servers (their PYTHONPATH:
tests/vllm/adaptations.py, the one place the suite's CPU adaptations are made).

PyPI's torch is a CUDA build, and on a machine without a GPU two calls the Mooncake connectors make
raise instead of running on the CPU (the CPU build of torch vLLM's CPU wheel is made against,
``torch==2.13.0+cpu``, is not on PyPI; on it they raise too: torch was not compiled with CUDA):

- ``torch.accelerator.current_device_index()``, which vLLM 0.32.0's MooncakeConnector worker asks for
  its device (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
  ``MooncakeConnectorWorker.__init__``). The index goes only to the CPU platform's ``set_device``
  (vllm/platforms/cpu.py: ``torch.cpu.set_device``, which ignores it): the answer is 0.
- ``torch.cuda.Event().record()``, with which MooncakeStoreConnector's worker marks the end of the
  forward pass its stores wait for (mooncake/store/worker.py ``MooncakeStoreWorker.wait_for_save``;
  its send thread calls ``synchronize`` before it reads the KV). On the CPU the forward pass has
  finished when ``wait_for_save`` runs (no streams run beside it), so an event that is done at once
  (:class:`HostEvent`) orders the same.

On a CPU with AMX the CPU attention takes its ``amx`` kernels for bfloat16
(vllm/v1/attention/backends/cpu_attn.py ``_get_attn_isa``), and neither vLLM's Python nor its csrc/cpu
(0.32.0 and 0.33.0) asks Linux for the tile state first (``arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)``, which the kernel requires before a process's first tile instruction): the worker
died of SIGILL in ``cpu_attention_with_kv_cache`` on the decode's first step over pulled KV (a server
answering prompts it computed whole never reached that kernel). ``torch.cpu._init_amx()`` makes the
request, once, for every thread of the process. A GPU server never runs this kernel.

And one backport of the pinned release, which is not about the CPU: vLLM 0.32.0's MultiConnector asserts
that every child connector with transfer stats has Prometheus metrics
(distributed/kv_transfer/kv_connector/v1/multi_connector.py ``MultiKVConnectorPromMetrics.observe``);
the Mooncake connector has none, so mode ``both``'s first transfer kills the server's output handler
("MooncakeConnector is not contained in the list of registered connectors with Prometheus metrics
support"). 0.33.0, the release the plan renders, skips such a child (:func:`observe_known_children`,
its code; tests/vllm/test_versions.py holds 0.33.0's function to the one read).
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

import torch

MULTI_CONNECTOR = "vllm.distributed.kv_transfer.kv_connector.v1.multi_connector"


class HostEvent:
    """``torch.cuda.Event`` for work that has finished when it is recorded: the CPU's forward pass."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def record(self, stream: object = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait(self, stream: object = None) -> None:
        pass


if not torch.accelerator.is_available():
    torch.accelerator.current_device_index = lambda: 0
    torch.cuda.Event = HostEvent
if torch.cpu._is_amx_tile_supported():
    torch.cpu._init_amx()  # arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) for the whole process


def observe_known_children(self: Any, transfer_stats_data: dict[str, Any], engine_idx: int = 0) -> None:
    """0.33.0's ``MultiKVConnectorPromMetrics.observe``: a child without Prometheus metrics is skipped."""
    for connector_id, stats_data in transfer_stats_data.items():
        metrics = self._prom_metrics.get(connector_id)
        if metrics is not None:
            metrics.observe(stats_data, engine_idx)


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``patch`` on the module ``name`` once it has been executed, wherever it is first imported."""

    def __init__(self, name: str, patch: Any) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, patch = spec.loader, self.patch
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def backport_multi_connector_metrics(module: ModuleType) -> None:
    module.MultiKVConnectorPromMetrics.observe = observe_known_children


sys.meta_path.insert(0, AfterImport(MULTI_CONNECTOR, backport_multi_connector_metrics))
