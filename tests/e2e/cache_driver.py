"""Inside a private network namespace (``unshare -n``): two processes fill one node cache directory from
a real S3 API (moto's server on 127.0.0.1) at the same time, with the program the init container runs
(components/render/model_cache_fill.py, as ``python3 -c``); then a third with a new revision.

Prints, as JSON: each fill's own answer, how often S3 was asked for each object, and the files in the
cache directory afterwards with their digests.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from components.render.node_cache import FILL_PROGRAM
from tests.e2e.streamer_driver import s3_server

BUCKET = "models"
PREFIX = "tiny-model"
FILES = {
    "config.json": 1024,
    "model-00001-of-00002.safetensors": 6 * 1024**2,
    "model-00002-of-00002.safetensors": 5 * 1024**2,
}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def main() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    import boto3

    endpoint, recorder = s3_server()
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "pod",
        "AWS_SECRET_ACCESS_KEY": "pod",
        "AWS_REGION": "us-east-1",
    }
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    s3.create_bucket(Bucket=BUCKET)
    contents = {name: secrets.token_bytes(size) for name, size in FILES.items()}
    for name, data in contents.items():
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}", Body=data)
    uploads = len(recorder.requests)
    root = Path(tempfile.mkdtemp(prefix="node-cache-"))
    program = FILL_PROGRAM.read_text()

    def start(revision: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", program, f"s3://{BUCKET}/{PREFIX}", str(root), revision]
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def answer(process: subprocess.Popen[str]) -> dict[str, Any]:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-2000:]
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    first, second = start("r1"), start("r1")
    concurrent = [answer(first), answer(second)]
    gets: dict[str, int] = {}
    for request in recorder.requests[uploads:]:
        if request["method"] == "GET" and request["path"].startswith(f"/{BUCKET}/"):
            key = request["path"].removeprefix(f"/{BUCKET}/")
            gets[key] = gets.get(key, 0) + 1
    after_concurrent = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    files = {
        str(p.relative_to(root / BUCKET / PREFIX / "r1")): digest(p.read_bytes())
        for p in (root / BUCKET / PREFIX / "r1").rglob("*")
        if p.is_file()
    }
    again = answer(start("r1"))
    revised = answer(start("r2"))
    print(
        json.dumps(
            {
                "concurrent": concurrent,
                "gets": gets,
                "entries": after_concurrent,
                "files": files,
                "expected": {name: digest(data) for name, data in contents.items()},
                "again": again,
                "revised": revised,
                "revisions_after": sorted(p.name for p in (root / BUCKET / PREFIX).iterdir()),
            }
        )
    )


if __name__ == "__main__":
    main()
