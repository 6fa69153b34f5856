"""Inside a private network namespace (``unshare -n``): the Run:ai Model Streamer from PyPI reads a
safetensors file from a real S3 API (moto's server on 127.0.0.1) with the credentials EKS Pod Identity
serves, and nothing else in its environment.

The stand-in for the Pod Identity agent listens where the agent does, http://169.254.170.23/v1/credentials
(the address is put on this namespace's loopback), and answers only a request whose Authorization header
is the token in AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, as the agent answers the token EKS mounts into
the pod (docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html). The pod's environment is the
one the Pod Identity webhook sets: AWS_CONTAINER_CREDENTIALS_FULL_URI and
AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, no keys.

What runs is what vLLM 0.33.0's ``--load-format runai_streamer`` runs for an ``s3://`` model: the
streamer's own listing of the prefix (``runai_model_streamer_s3.files``, boto3) and its pull of the
small files (vLLM's ObjectStorageModel.pull_files, which ignores the weights), then the weights read by
its C++ reader (libstreamer with the AWS SDK for C++ backend, libstreamers3.so) in concurrent ranged
GETs into memory. The tensor layer above the reader (SafetensorsStreamer) needs torch, which the vLLM
image has and these tests do not install: the driver parses the safetensors header itself and asks the
reader for each tensor's byte range, as that layer does.

Prints, as JSON: every S3 request moto answered (method, path, query keys, Range, the signing key id),
every credentials request the stand-in answered, and whether the bytes read equal the file's tensors.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import secrets
import struct
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

POD_IDENTITY_ADDRESS = "169.254.170.23"
"""Where the EKS Pod Identity agent serves credentials on every node (link-local)."""
POD_IDENTITY_PATH = "/v1/credentials"
BUCKET = "models"
PREFIX = "tiny-model"
ACCESS_KEY = "ASIAPODIDENTITYTEST1"
SECRET_KEY = "pod-identity-secret-key-0000000000000000"
SESSION_TOKEN = "pod-identity-session-token"


def network() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", f"{POD_IDENTITY_ADDRESS}/32", "dev", "lo"], check=True)


def safetensors_file(path: Path, total_bytes: int) -> dict[str, bytes]:
    """A safetensors file of random uint8 tensors of about ``total_bytes``; returns name -> bytes."""
    sizes = [total_bytes // 4, total_bytes // 4, total_bytes // 3, total_bytes - 2 * (total_bytes // 4)]
    sizes[-1] -= sizes[2]
    tensors = {f"model.layers.{index}.weight": secrets.token_bytes(size) for index, size in enumerate(sizes)}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, data in tensors.items():
        header[name] = {"dtype": "U8", "shape": [len(data)], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for data in tensors.values():
            out.write(data)
    return tensors


class Recorder:
    """WSGI middleware: what S3 (moto) was asked."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        authorization = environ.get("HTTP_AUTHORIZATION", "")
        credential = (
            authorization.split("Credential=", 1)[1].split("/", 1)[0] if "Credential=" in authorization else None
        )
        with self.lock:
            self.requests.append(
                {
                    "method": environ["REQUEST_METHOD"],
                    "path": environ.get("PATH_INFO", ""),
                    "query": sorted(parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)),
                    "prefix": parse_qs(environ.get("QUERY_STRING", "")).get("prefix", [None])[0],
                    "range": environ.get("HTTP_RANGE"),
                    "key_id": credential,
                    "session_token": environ.get("HTTP_X_AMZ_SECURITY_TOKEN"),
                }
            )
        return self.app(environ, start_response)


def s3_server() -> tuple[str, Recorder]:
    from moto.server import DomainDispatcherApplication, create_backend_app  # type: ignore[attr-defined]
    from werkzeug.serving import make_server

    recorder = Recorder(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, recorder, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", recorder


def pod_identity_agent(token: str) -> list[dict[str, Any]]:
    """The agent's credentials endpoint: answers the mounted token only."""
    served: list[dict[str, Any]] = []

    class Agent(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            authorized = self.path == POD_IDENTITY_PATH and self.headers.get("Authorization") == token
            served.append({"path": self.path, "authorized": authorized})
            body = (
                json.dumps(
                    {
                        "AccessKeyId": ACCESS_KEY,
                        "SecretAccessKey": SECRET_KEY,
                        "Token": SESSION_TOKEN,
                        "AccountId": "123456789012",
                        "Expiration": "2099-01-01T00:00:00Z",
                    }
                )
                if authorized
                else json.dumps({"message": "invalid token"})
            ).encode()
            self.send_response(200 if authorized else 403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((POD_IDENTITY_ADDRESS, 80), Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return served


def upload(endpoint: str, files: Iterable[Path]) -> None:
    """As the operator does, with keys of their own (not the pod's)."""
    import boto3

    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="ADMIN", aws_secret_access_key="x"
    )
    s3.create_bucket(Bucket=BUCKET)
    for path in files:
        s3.upload_file(str(path), BUCKET, f"{PREFIX}/{path.name}")


def streamer_modules() -> Any:
    """The streamer's reader and its S3 helpers, without its torch layer (see the module's docstring):
    the package's ``__init__`` imports the torch layer, so its path is registered without running it."""
    import importlib.util

    spec = importlib.util.find_spec("runai_model_streamer_s3")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    package = types.ModuleType("runai_model_streamer")
    package.__path__ = [str(site / "runai_model_streamer")]
    sys.modules["runai_model_streamer"] = package
    from runai_model_streamer.libstreamer import libstreamer
    from runai_model_streamer.s3_utils import s3_utils

    return libstreamer, s3_utils


def read_tensors(libstreamer: Any, uri: str) -> dict[str, bytes]:
    """The safetensors header, then every tensor in one submission of ranged reads."""

    def fetch(ranges: list[tuple[int, int]]) -> list[bytes]:
        buffers = [ctypes.create_string_buffer(max(size, 1)) for _, size in ranges]
        streamer = libstreamer.runai_start()
        try:
            libstreamer.runai_request(
                streamer,
                [uri],
                [len(ranges)],
                [offset for offset, _ in ranges],
                [size for _, size in ranges],
                [ctypes.addressof(buffer) for buffer in buffers],
            )
            done = 0
            while done < len(ranges):
                response = libstreamer.runai_response(streamer, 60_000)
                assert response is not None, "the streamer ended before every range was read"
                code, _, _, _, _ = response
                if code != libstreamer.SUCCESS_ERROR_CODE:
                    raise RuntimeError(f"streamer read failed: {libstreamer.runai_response_str(code)!r}")
                done += 1
        finally:
            libstreamer.runai_end(streamer)
        return [buffer.raw[:size] for buffer, (_, size) in zip(buffers, ranges, strict=True)]

    (length_bytes,) = fetch([(0, 8)])
    (length,) = struct.unpack("<Q", length_bytes)
    (header_bytes,) = fetch([(8, length)])
    header = json.loads(header_bytes)
    header.pop("__metadata__", None)
    start = 8 + length
    names = sorted(header)
    ranges = [
        (start + header[n]["data_offsets"][0], header[n]["data_offsets"][1] - header[n]["data_offsets"][0])
        for n in names
    ]
    return dict(zip(names, fetch(ranges), strict=True))


def main() -> None:
    spec = json.loads(sys.argv[1])
    network()
    workdir = Path(tempfile.mkdtemp(prefix="streamer-"))
    model = workdir / "model"
    model.mkdir()
    tensors = safetensors_file(model / "model.safetensors", spec["bytes"])
    (model / "config.json").write_text(json.dumps({"architectures": ["TinyForCausalLM"]}))
    endpoint, recorder = s3_server()
    upload(endpoint, sorted(model.iterdir()))
    uploads = len(recorder.requests)
    token = secrets.token_hex(16)
    token_file = workdir / "eks-pod-identity-token"
    token_file.write_text(token if spec["token_matches"] else secrets.token_hex(16))
    agent = pod_identity_agent(token)
    # The pod's environment: what the Pod Identity webhook sets, what the program renders
    # (components/render/model_loading.py), and where the test's S3 is. No keys anywhere.
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        del os.environ[name]
    os.environ.update(spec["env"])
    os.environ.update(
        {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"http://{POD_IDENTITY_ADDRESS}{POD_IDENTITY_PATH}",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
            "AWS_ENDPOINT_URL": endpoint,
            "RUNAI_STREAMER_S3_ENDPOINT": endpoint,  # vLLM copies AWS_ENDPOINT_URL here
            "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0",  # moto on an address, not a bucket's name
            "HOME": str(workdir),
        }
    )
    libstreamer, s3_utils = streamer_modules()
    uri = f"s3://{BUCKET}/{PREFIX}"
    pulled = workdir / "pulled"
    result: dict[str, Any] = {"errors": {}}
    # vLLM's order: list the weights, pull the small files, stream the weights.
    steps: dict[str, Callable[[], Any]] = {
        "listed": lambda: s3_utils.s3_glob(uri, ["*.safetensors"]),
        "pulled": lambda: s3_utils.s3_pull_files(uri, str(pulled), None, ["*.pt", "*.safetensors", "*.bin"]),
        "read": lambda: read_tensors(libstreamer, f"{uri}/model.safetensors"),
    }
    for step, run in steps.items():
        try:
            result[step] = run()
        except Exception as error:
            result["errors"][step] = f"{type(error).__name__}: {error}"[:500]
    read = result.pop("read", None) or {}
    result.update(
        {
            "pulled": sorted(str(p.relative_to(pulled)) for p in pulled.rglob("*") if p.is_file()),
            "tensors_equal": read == tensors,
            "tensor_digest": hashlib.sha256(b"".join(read[n] for n in sorted(read))).hexdigest()[:16],
            "bytes_read": sum(len(data) for data in read.values()),
            "s3_requests": recorder.requests[uploads:],
            "agent": agent,
        }
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
