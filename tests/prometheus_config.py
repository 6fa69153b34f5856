"""The prometheus.yml the pinned chart renders from our values, rebuilt as its template does
(prometheus-community/helm-charts prometheus-29.27.0 charts/prometheus/templates/cm.yaml): ``global``
from ``server.global``, then each enabled ``scrapeConfigs`` entry in key order (Go templates range
over a map's sorted keys) as a job named by its key, ``enabled`` dropped; ``server.remoteWrite`` as
``remote_write``. The chart's ``rule_files``
(empty files it also writes) and ``alerting`` (Alertmanager is off) are left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def rendered_config(values: Mapping[str, Any]) -> dict[str, Any]:
    jobs = []
    for key in sorted(values["scrapeConfigs"]):
        job = dict(values["scrapeConfigs"][key])
        if not job.pop("enabled", True):
            continue
        jobs.append({"job_name": job.pop("job_name", "") or key, **job})
    rendered: dict[str, Any] = {"global": dict(values["server"]["global"]), "scrape_configs": jobs}
    if values["server"].get("remoteWrite"):
        rendered["remote_write"] = list(values["server"]["remoteWrite"])
    return rendered


def with_file_sd(config: Mapping[str, Any], directory: str) -> dict[str, Any]:
    """``config`` with each job's Kubernetes discovery replaced by targets read from
    ``<directory>/<job>.json``: Debian's Prometheus is built without the Kubernetes SD (its promtool
    refuses ``kubernetes_sd_configs``), and a test can write there the targets Kubernetes SD would
    give, ``__meta_kubernetes_*`` labels included, for the relabelling to act on."""
    jobs = []
    for job in config["scrape_configs"]:
        job = dict(job)
        if job.pop("kubernetes_sd_configs", None) is not None:
            job["file_sd_configs"] = [{"files": [f"{directory}/{job['job_name']}.json"]}]
        jobs.append(job)
    return {**config, "scrape_configs": jobs}
