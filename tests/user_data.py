"""Read a launch template's ``user_data`` back the way a node does: base64, then MIME multi-part."""

from __future__ import annotations

import base64
import email
from email.message import Message
from typing import Any

from ruamel.yaml import YAML


def mime_parts(user_data: str) -> dict[str, str]:
    """Content type -> body of each part (the program renders each type at most once)."""
    message = email.message_from_string(base64.b64decode(user_data, validate=True).decode("ascii"))
    assert message.is_multipart()
    assert message["MIME-Version"] == "1.0"
    parts: dict[str, str] = {}
    for part in message.get_payload():
        assert isinstance(part, Message)
        content_type = part.get_content_type()
        assert content_type not in parts, f"two {content_type} parts"
        payload = part.get_payload()
        assert isinstance(payload, str)
        parts[content_type] = payload
    return parts


def node_config(user_data: str) -> Any:
    """The NodeConfig part, parsed as nodeadm parses it (YAML)."""
    return YAML(typ="safe", pure=True).load(mime_parts(user_data)["application/node.eks.aws"])
