"""Field types of an endpoint, each a string checked by its own validator: a path inside the pod,
an s3:// URI, the name a model is served under, and a label key the user may set."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from components.spec.base import LabelKey, fail

_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")
# A served name goes on the server's command line and into clients' requests: no spaces, no
# leading '-' (it would read as a flag).
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,255}$")
RESERVED_LABEL_PREFIX = "app.kubernetes.io/"


def _path(value: str) -> str:
    if not value.startswith("/"):
        raise fail("path", "must start with '/', got {value!r}", value=value)
    return value


def _s3_uri(value: str) -> str:
    if not _S3_URI.match(value):
        raise fail("s3_uri", "must be an s3:// URI such as s3://my-bucket/models/llama, got {value!r}", value=value)
    return value


def _model_name(value: str) -> str:
    if not _MODEL_NAME.match(value):
        raise fail(
            "model_name",
            "must be a model name such as Qwen/Qwen3-8B (at most 256 letters, digits and '_.:/@+-', "
            "starting with a letter, digit or '_'), got {value!r}",
            value=value,
        )
    return value


def _own_label(key: str) -> str:
    if key.startswith(RESERVED_LABEL_PREFIX):
        raise fail(
            "reserved_label",
            "{key!r} is set by inference-fleet (the app.kubernetes.io/ labels are its selectors); choose another key",
            key=key,
        )
    return key


Path = Annotated[str, AfterValidator(_path)]
S3Uri = Annotated[str, AfterValidator(_s3_uri)]
ModelName = Annotated[str, AfterValidator(_model_name)]
UserLabelKey = Annotated[LabelKey, AfterValidator(_own_label)]
