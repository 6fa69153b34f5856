"""The node-local model cache (docs/model-delivery.md, "Node cache"): a directory on the node's instance
store, where weights land once per node and every pod of the endpoint there reads them.

Node groups with instance store put it in one RAID0 array mounted at /mnt/k8s-disks/0
(components/platform/user_data.py), so the cache lives under it. Two kinds of entry:

- ``s3/<bucket>/<prefix>/<revision>``: a model_source, filled by the endpoint's init container with
  components/render/model_cache_fill.py (an exclusive lock, a private copy, an atomic rename) and
  mounted read-only into the server at model_path.
- ``hub``: the Hugging Face Hub cache (HF_HUB_CACHE) the servers of a Hub model download into and
  read from; huggingface_hub serialises concurrent downloads of one file itself (a lock file per blob,
  the blob written under ``.incomplete`` and renamed when whole).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.render.model_loading import REGION_ENV
from components.render.placement import PlacedEndpoint

NODE_CACHE_ROOT = "/mnt/k8s-disks/0/inference-fleet/models"
CACHE_VOLUME = "model-cache"
CACHE_MOUNT = "/model-cache"
HUB_SUBDIR = "hub"
S3_SUBDIR = "s3"
HUB_CACHE_ENV = "HF_HUB_CACHE"
DEFAULT_REVISION = "initial"
FILL_PROGRAM = Path(__file__).with_name("model_cache_fill.py")


def cache_volume() -> dict[str, Any]:
    return {"name": CACHE_VOLUME, "hostPath": {"path": NODE_CACHE_ROOT, "type": "DirectoryOrCreate"}}


def revision_of(revision: str | None) -> str:
    return revision or DEFAULT_REVISION


def entry(source: str, revision: str | None) -> str:
    """The model's directory under the cache root, as the fill program names it."""
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    parts = [S3_SUBDIR, bucket, *[part for part in prefix.split("/") if part], revision_of(revision)]
    return "/".join(parts)


def fill_container(endpoint: PlacedEndpoint, image: str, security: dict[str, Any]) -> dict[str, Any]:
    """Fills the node's copy of model_source once, in the server's image (python3 and boto3)."""
    spec = endpoint.spec
    assert spec.model_source is not None
    amounts = {"cpu": "2", "memory": "4Gi"}
    return {
        "name": "model-cache-fill",
        "image": image,
        "command": ["python3", "-c", FILL_PROGRAM.read_text()],
        "args": [spec.model_source, f"{CACHE_MOUNT}/{S3_SUBDIR}", revision_of(spec.model_revision)],
        "env": [{"name": REGION_ENV, "value": endpoint.region}, {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        "volumeMounts": [{"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT}, {"name": "tmp", "mountPath": "/tmp"}],
        # Root, to write the hostPath directory the kubelet creates root-owned; no capabilities.
        "securityContext": {**security, "readOnlyRootFilesystem": True},
    }


def server_mounts(endpoint: PlacedEndpoint) -> list[dict[str, Any]]:
    spec = endpoint.spec
    if spec.model_source is not None:
        assert spec.model_path is not None
        sub = entry(spec.model_source, spec.model_revision)
        return [{"name": CACHE_VOLUME, "mountPath": spec.model_path, "subPath": sub, "readOnly": True}]
    return [{"name": CACHE_VOLUME, "mountPath": f"{CACHE_MOUNT}/{HUB_SUBDIR}", "subPath": HUB_SUBDIR}]


def server_env(endpoint: PlacedEndpoint) -> list[dict[str, str]]:
    if endpoint.spec.model_source is not None:
        return []
    return [{"name": HUB_CACHE_ENV, "value": f"{CACHE_MOUNT}/{HUB_SUBDIR}"}]
