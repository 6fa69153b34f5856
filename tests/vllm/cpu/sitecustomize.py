"""Loaded first by every Python process of the real-engine suite's vLLM servers (their PYTHONPATH:
tests/vllm/adaptations.py, the one place the suite's CPU adaptations are made).

vLLM 0.32.0's MooncakeConnector worker asks ``torch.accelerator.current_device_index()`` for its
device (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
``MooncakeConnectorWorker.__init__``). PyPI's torch is a CUDA build, and on a machine without a GPU
that call raises instead of naming the CPU; the CPU build of torch vLLM's CPU wheel is made against
(``torch==2.13.0+cpu``) is not on PyPI. The index goes only to the CPU platform's ``set_device``
(vllm/platforms/cpu.py: ``torch.cpu.set_device``, which ignores it), so with no accelerator
available the answer is 0.
"""

import torch

if not torch.accelerator.is_available():
    torch.accelerator.current_device_index = lambda: 0
