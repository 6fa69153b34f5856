"""What a node configures on itself at boot, through its launch template's user data (pure).

Managed node groups whose launch template names no AMI merge EKS's own user data (the
NodeConfig with the cluster's coordinates) with ours, which must therefore be a MIME multi-part
document (awsdocs/amazon-eks-user-guide latest/ug/nodes/launch-templates.adoc, "Amazon EC2 user
data"). On the AL2023 AMIs ``nodeadm`` reads every ``application/node.eks.aws`` part and merges
them in order; shell parts run in cloud-init's final stage, and ``nodeadm-run.service``, which
starts kubelet, is ordered after ``cloud-final.service`` (awslabs/amazon-eks-ami v20260724
templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service), so a shell part takes
effect before kubelet first reads the node.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from ruamel.yaml import YAML

from components.scheduling import HUGEPAGE_2MI_BYTES

BOUNDARY = "==INFERENCE-FLEET=="
NODE_CONFIG_CONTENT_TYPE = "application/node.eks.aws"
SHELL_CONTENT_TYPE = 'text/x-shellscript; charset="us-ascii"'
NODE_CONFIG_API_VERSION = "node.eks.aws/v1alpha1"

LOCAL_STORAGE_STRATEGY = "RAID0"
"""nodeadm's ``spec.instance.localStorage.strategy`` (awslabs/amazon-eks-ami v20260724
nodeadm/api/v1alpha1/nodeconfig_types.go: RAID0, RAID10 or Mount). RAID0 stripes every instance
store NVMe disk into one array under /mnt/k8s-disks/0 and bind-mounts /var/lib/kubelet,
/var/lib/containerd, /var/log/pods and /var/lib/soci-snapshotter-grpc onto it
(templates/al2023/runtime/bin/setup-local-disks): images and emptyDirs (the synced weights) land
on the local NVMe instead of the root volume. Instance store is scratch space by design, so no
redundancy is lost that the root volume would have given."""

HUGEPAGES_SYSCTL_FILE = "/etc/sysctl.d/90-inference-fleet-hugepages.conf"


def node_config(local_storage: bool) -> dict[str, Any]:
    """Our NodeConfig part: only what we add to EKS's own (which carries the cluster)."""
    spec: dict[str, Any] = {}
    if local_storage:
        spec["instance"] = {"localStorage": {"strategy": LOCAL_STORAGE_STRATEGY}}
    return {"apiVersion": NODE_CONFIG_API_VERSION, "kind": "NodeConfig", "spec": spec}


def hugepages_script(size_bytes: int) -> str:
    """Reserve exactly ``size_bytes`` of 2 MiB huge pages, now and on every later boot, or fail loudly.

    Exactly, not at least: the capacity check counts the node's memory as its RAM minus this
    reservation (the node group's ``hugepages_2mi``). ``vm.nr_hugepages`` counts pages of the
    default huge page size, 2 MiB on the AL2023 kernels (4 KiB base pages) for x86_64 and arm64;
    the script refuses any other size.
    """
    if size_bytes <= 0 or size_bytes % HUGEPAGE_2MI_BYTES:
        raise ValueError(f"huge page reservation must be a positive multiple of 2 MiB, got {size_bytes} bytes")
    pages = size_bytes // HUGEPAGE_2MI_BYTES
    return "\n".join(
        [
            "#!/bin/bash",
            "# inference-fleet: 2 MiB huge pages for the rdma pods (libfabric's EFA provider, Mooncake's store),",
            "# reserved before kubelet starts: node_groups.<group>.hugepages_2mi.",
            "set -o errexit -o nounset -o pipefail",
            f"pages={pages}",
            "size_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)",
            'if [ "$size_kb" != "2048" ]; then',
            '  echo "default huge page size is ${size_kb} kB, not 2048 kB: no huge pages reserved" >&2',
            "  exit 1",
            "fi",
            f'echo "vm.nr_hugepages = $pages" > {HUGEPAGES_SYSCTL_FILE}',
            'sysctl -w vm.nr_hugepages="$pages"',
            "reserved=$(cat /proc/sys/vm/nr_hugepages)",
            'if [ "$reserved" != "$pages" ]; then',
            '  echo "reserved ${reserved} of ${pages} 2 MiB huge pages" >&2',
            "  exit 1",
            "fi",
            "",
        ]
    )


def _yaml(document: dict[str, Any]) -> str:
    stream = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.explicit_start = True
    yaml.dump(document, stream)
    return stream.getvalue()


def mime_document(parts: list[tuple[str, str]]) -> str:
    """A MIME multi-part archive of ``(content type, body)`` parts, in order."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n"), ""]
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"


def node_user_data(instance_store_gib: int, hugepages_bytes: int) -> str | None:
    """The launch template's ``user_data`` (base64 of the MIME text), or None when the node needs nothing.

    - instance store: a NodeConfig putting kubelet and containerd state on the local NVMe RAID0;
    - huge pages (EFA groups, ``hugepages_2mi``): a shell part reserving them for the rdma pods
      (nodeadm's NodeConfig has no sysctl or huge page setting: nodeconfig_types.go above).
    """
    parts: list[tuple[str, str]] = []
    if instance_store_gib > 0:
        parts.append((NODE_CONFIG_CONTENT_TYPE, _yaml(node_config(local_storage=True))))
    if hugepages_bytes > 0:
        parts.append((SHELL_CONTENT_TYPE, hugepages_script(hugepages_bytes)))
    if not parts:
        return None
    return base64.b64encode(mime_document(parts).encode("ascii")).decode("ascii")
