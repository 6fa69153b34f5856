"""Fill a node's model cache from S3 once (docs/model-delivery.md, "Node cache"). A program that runs
in the endpoint's init container (``python3 -c <this file> SOURCE CACHE_ROOT REVISION``, in the server's
image, which has boto3: runai-model-streamer-s3 requires it), standard library and boto3 only.

``CACHE_ROOT/<bucket>/<prefix>/<revision>`` is complete when it exists: it appears only by an atomic
rename of a finished copy. Pods of the node take an exclusive ``flock`` on ``<revision>.lock`` beside
it, so one fills while the others wait, then find the copy and leave. A fill that dies leaves only a
``.<revision>.partial-*`` directory, removed by the next fill under the lock. Once a revision is in
place, the other revisions of the same source are removed (a changed revision invalidates the old copy).

Prints one JSON line: ``{"path": ..., "filled": bool, "objects": n}``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import uuid
from pathlib import Path


def target(source: str, cache_root: str, revision: str) -> Path:
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    return Path(cache_root, bucket, *[part for part in prefix.split("/") if part], revision)


def download(source: str, into: Path) -> int:
    """Every object under the source's prefix, as ``aws s3 sync`` copies it."""
    import boto3

    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    s3 = boto3.client("s3")
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            relative = item["Key"][len(prefix) :]
            if not relative or relative.endswith("/"):
                continue
            path = (into / relative).resolve()
            if into.resolve() not in path.parents:
                raise SystemExit(f"refusing object key outside the model's prefix: {item['Key']!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, item["Key"], str(path))
            count += 1
    return count


def fill(source: str, cache_root: str, revision: str) -> dict[str, object]:
    final = target(source, cache_root, revision)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.is_dir():
        return {"path": str(final), "filled": False, "objects": None}
    with open(final.parent / f"{revision}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if final.is_dir():  # another pod filled it while this one waited
            return {"path": str(final), "filled": False, "objects": None}
        for stale in final.parent.glob(f".{revision}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        partial = final.parent / f".{revision}.partial-{uuid.uuid4().hex}"
        partial.mkdir()
        objects = download(source, partial)
        os.sync()
        os.rename(partial, final)
    for other in final.parent.iterdir():
        if other.is_dir() and other.name != final.name and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
            (final.parent / f"{other.name}.lock").unlink(missing_ok=True)
    return {"path": str(final), "filled": True, "objects": objects}


if __name__ == "__main__":
    print(json.dumps(fill(*sys.argv[1:4])))
