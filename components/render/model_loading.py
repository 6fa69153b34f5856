"""How an endpoint's weights reach its server (docs/model-delivery.md): synced into the pod by an init
container (``aws s3 sync``, then the server reads the copy), or streamed from S3 into memory by vLLM's
Run:ai Model Streamer loader. Pure: facts as data and the functions that size them.

Streaming, as vLLM 0.33.0 runs it (vllm/model_executor/model_loader/runai_streamer_loader.py): the
model is the ``s3://`` URI itself, ``--load-format runai_streamer``; ``--model-loader-extra-config``
takes ``concurrency`` and ``memory_limit`` (integers), which the loader exports as
RUNAI_STREAMER_CONCURRENCY and RUNAI_STREAMER_MEMORY_LIMIT for the streamer. The config and tokenizer
files are pulled into a local directory first (vllm/transformers_utils/runai_utils.py,
ObjectStorageModel.pull_files, which ignores the weights); the weights are read in concurrent ranged
GETs by the streamer's C++ reader (runai-model-streamer-s3, AWS SDK for C++), which the vLLM image
installs as ``runai-model-streamer[s3]`` (docker/Dockerfile, the vllm-openai image).

Credentials: neither part is given keys. The listing and the small files go through boto3 (the
streamer's ``runai_model_streamer_s3.files``, RUNAI_STREAMER_NO_BOTO3_SESSION=1 by default: a plain
``boto3.client("s3")``), the weights through the AWS SDK for C++ default chain; both chains read the
container credentials that EKS Pod Identity's webhook puts in the pod's environment
(AWS_CONTAINER_CREDENTIALS_FULL_URI = http://169.254.170.23/v1/credentials and
AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE), and both accept the agent's link-local address. Proven with
runai-model-streamer 0.17.1 from PyPI in tests/e2e/test_model_streaming.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

ModelLoading = Literal["stream", "sync", "cache"]

LOAD_FORMAT_FLAG = "--load-format"
LOADER_CONFIG_FLAG = "--model-loader-extra-config"
STREAMER_LOAD_FORMAT = "runai_streamer"
LOADING_SOURCE = "model_loading"
"""The spec field that owns the flags and the variable streaming renders."""
REGION_ENV = "AWS_REGION"
"""The region the S3 clients sign for (the bucket's, taken to be the endpoint's region, as for sync)."""

READERS_PER_CPU = 2
"""Each reader is one S3 connection: TLS and a memcpy per range, mostly waiting on the network."""
MIN_READERS = 4
MAX_READERS = 64
STREAMER_MEMORY_SHARE = 8
"""The streamer's staging buffer, all ranks of a pod together, is at most 1/8 of the pod's memory:
/dev/shm takes half (components/render/pods.py shm_size), the server process the rest."""


@dataclass(frozen=True)
class StreamerRequest:
    """One kind of S3 request the streamer makes, and what IAM authorises it as."""

    name: str
    method: str
    on_object: bool
    """An object's key, else the bucket (a listing)."""
    action: str


STREAMER_REQUESTS = (
    # runai_model_streamer_s3.files.list_files: ListObjectsV2 with Prefix "<prefix>/" (the glob of the
    # weights, with Delimiter "/"; the pull of the small files, recursive).
    StreamerRequest("list the model's prefix", "GET", on_object=False, action="s3:ListBucket"),
    # boto3's download_file of each small file: a HEAD for its size, then GET.
    StreamerRequest("head a small file", "HEAD", on_object=True, action="s3:GetObject"),
    StreamerRequest("get a small file or a range of the weights", "GET", on_object=True, action="s3:GetObject"),
)
"""Every request of a streamed load; tests/e2e/test_model_streaming.py checks the real streamer makes
no other, tests/security/test_model_source_access.py that the rendered role allows each."""


def millicores(cpu: str) -> int:
    """Kubernetes CPU quantity (``8``, ``1.5``, ``500m``) in millicores."""
    if cpu.endswith("m"):
        return int(cpu[:-1])
    return int(Decimal(cpu) * 1000)


def streamer_config(cpu: str, memory_bytes: int, gpu_count: int) -> dict[str, int]:
    """The streamer's readers and staging buffer per server process, sized from the pod.

    vLLM runs one worker per GPU and each loads its shards through its own streamer, so both are split
    across them: the readers, to keep the pod's connections at READERS_PER_CPU per CPU; the buffer, so
    that the pod's total stays within 1/STREAMER_MEMORY_SHARE of its memory whether the streamer takes
    the limit per process (releases before 0.17) or per node and divides it itself (0.17.1
    distributed_streamer.py rank_memory_limit, floored at the largest tensor). Unbounded, the streamer's
    default is 40 GB per node (0.17.1 file_streamer/requests_iterator.py), more than a small pod has."""
    processes = max(gpu_count, 1)
    readers = READERS_PER_CPU * millicores(cpu) // 1000 // processes
    return {
        "concurrency": max(MIN_READERS, min(MAX_READERS, readers)),
        "memory_limit": memory_bytes // STREAMER_MEMORY_SHARE // processes,
    }


def streaming_flags(cpu: str, memory_bytes: int, gpu_count: int) -> tuple[tuple[str, str], ...]:
    """(flag, value) pairs vLLM takes for a streamed load."""
    config = json.dumps(streamer_config(cpu, memory_bytes, gpu_count), sort_keys=True, separators=(",", ":"))
    return ((LOAD_FORMAT_FLAG, STREAMER_LOAD_FORMAT), (LOADER_CONFIG_FLAG, config))
