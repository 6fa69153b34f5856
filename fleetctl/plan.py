"""The offline plan: run the real ``__main__.py`` under recording mocks (docs/design.md, decision 13).

Writes ``plan.json`` (every resource with urn, type, name, parent, provider,
inputs and options, plus the stack outputs) and the Kubernetes manifests per
region and namespace. Same input, byte-identical output. Nothing is written
unless the whole run succeeds.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import runpy
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi.runtime import config as pulumi_config
from pulumi.runtime import mocks, settings
from pulumi.runtime import stack as pulumi_stack
from pulumi.runtime.sync_await import _sync_await
from ruamel.yaml import YAML

from components.spec.errors import Problem, ProblemsError
from fleetctl import interrupt, whole_components
from fleetctl.mocks import FleetMocks, RecordingMonitor, Registration
from fleetctl.stackfile import PROJECT_ROOT, StackFile

PROJECT = "inference-fleet"
PROGRAM = PROJECT_ROOT / "__main__.py"

# Signatures of Pulumi's special property values (sdk/go/common/resource/sig).
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET = "[secret]"
UNKNOWN = "[unknown]"

_OPTION_FIELDS = {
    "protect": "protect",
    "retainOnDelete": "retainOnDelete",
    "ignoreChanges": "ignoreChanges",
    "deleteBeforeReplace": "deleteBeforeReplace",
    "replaceOnChanges": "replaceOnChanges",
    "additionalSecretOutputs": "additionalSecretOutputs",
    "customTimeouts": "customTimeouts",
    "aliases": "aliases",
    "aliasSpecs": "aliases",
    "aliasURNs": "aliases",
    "importId": "import",
    "deletedWith": "deletedWith",
    "hooks": "hooks",
}


@dataclass(frozen=True)
class Plan:
    project: str
    stack: str
    resources: tuple[dict[str, Any], ...]
    outputs: dict[str, Any]

    def to_json(self) -> str:
        document = {
            "project": self.project,
            "stack": self.stack,
            "resources": list(self.resources),
            "outputs": self.outputs,
        }
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class ProgramError(Exception):
    """The program failed under mocks; the message is the program's own."""


def normalise(value: Any) -> Any:
    """Plain JSON: keys sorted, integral floats back to ints, secrets and unknowns marked."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        return UNKNOWN if value == _UNKNOWN else value
    if isinstance(value, list):
        return [normalise(item) for item in value]
    if isinstance(value, Mapping):
        signature = value.get(_SIG_KEY)
        if signature == _SECRET_SIG:
            return SECRET
        if signature == _RESOURCE_SIG:
            return value.get("urn")
        if signature == _OUTPUT_SIG:
            if value.get("secret"):
                return SECRET
            return normalise(value["value"]) if "value" in value else UNKNOWN
        return {str(key): normalise(value[key]) for key in sorted(value)}
    return value


def _provider_urn(reference: str) -> str | None:
    """A provider reference is '<urn>::<id>'; keep the URN."""
    return reference.rsplit("::", 1)[0] if reference else None


def _resource_entry(registration: Registration) -> dict[str, Any]:
    request = registration.request
    options: dict[str, Any] = {}
    for field, name in _OPTION_FIELDS.items():
        if field in request and request[field] not in (None, [], {}, False, ""):
            value = normalise(request[field])
            options[name] = sorted(options.get(name, []) + value, key=json.dumps) if name == "aliases" else value
    dependencies = set(request.get("dependencies", []))
    implicit = {urn for deps in request.get("propertyDependencies", {}).values() for urn in deps.get("urns", [])}
    explicit = sorted(dependencies - implicit)
    if explicit:
        options["dependsOn"] = explicit
    if request.get("providers"):
        options["providers"] = {package: _provider_urn(ref) for package, ref in sorted(request["providers"].items())}
    return {
        "urn": registration.urn,
        "type": request["type"],
        "name": request["name"],
        "parent": request.get("parent") or None,
        "provider": _provider_urn(request.get("provider", "")),
        "custom": registration.custom,
        "inputs": normalise(request.get("object", {})),
        "options": options,
    }


FULL_COLLECTION_THRESHOLD = 10_000
"""While a plan is made, the cyclic collector scans the oldest generation only after this many
collections of the middle one (Python's default: 10)."""


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Make a plan without the collector's full passes over a heap that only grows.

    A plan allocates millions of objects that live to its end (the SDK's Outputs and futures, the
    records, the rendered objects), so the collector's full collections, each a pass over every
    object alive, come ever more often over an ever larger heap: a cost that grows faster than the
    plan (at N=100, R=1 a quarter of the program's time). Meanwhile the objects alive before (the
    imported SDKs) are frozen out of its scans and the oldest generation is collected rarely;
    the young generations are collected as usual, so short-lived cycles are freed as before (the
    peak RSS does not grow). Both are restored when the plan is made."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], FULL_COLLECTION_THRESHOLD))
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@contextmanager
def _program_path() -> Iterator[None]:
    root = str(PROJECT_ROOT)
    added = root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        yield
    finally:
        if added:
            sys.path.remove(root)


def run_program(stack_file: StackFile, program: Path = PROGRAM, project: str = PROJECT, *, plain: bool = False) -> Plan:
    """Run ``program`` in-process with the stack's config and return what it registered.

    ``plain=True`` takes the plain path, slower on large stacks, kept so a test can hold both to the
    same plan: the waiting for the program's Outputs is left to the SDK alone, and the recording
    keeps every field of each request."""
    monitor = RecordingMonitor(FleetMocks(), record_everything=plain)
    settings.configure(
        mocks.MockSettings(  # type: ignore[no-untyped-call]
            monitor=monitor,
            monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),  # type: ignore[no-untyped-call]
            engine=mocks.MockEngine(None),
            project=project,
            stack=stack_file.stack,
            dry_run=False,
            organization="organization",
            callbacks=None,
        )
    )
    settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi_config.set_all_config(dict(stack_file.engine_config), list(stack_file.secret_keys))

    async def program_main() -> None:
        runpy.run_path(str(program), run_name="__main__")
        if not plain:
            await _outputs_settled()

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    failure: str | None = None
    try:
        with _program_path(), full_collections_deferred():
            _sync_await(pulumi_stack.run_in_stack(program_main))
    except Exception as error:  # the program's own failure, reported without a traceback
        failure = str(error) or type(error).__name__
    finally:
        _drain(loop)
        asyncio.set_event_loop(None)
        loop.close()
        monitor.close()
    # Outside the except block: nothing refers to the failed program's outputs any more.
    _forget_program_state(failed=failure is not None)
    if failure is not None:
        raise ProgramError(failure)
    resources = tuple(
        sorted(
            (_resource_entry(registration) for registration in monitor.registrations),
            key=lambda entry: str(entry["urn"]),
        )
    )
    return Plan(project=project, stack=stack_file.stack, resources=resources, outputs=normalise(monitor.stack_outputs))


async def _outputs_settled() -> None:
    """Wait until every Output and RPC the program started has finished, one ``asyncio.wait`` per
    generation of them (those started while the previous generation ran), before the SDK's own wait.

    ``pulumi.runtime.stack.wait_for_rpcs`` (pulumi 3.272.0) waits on the program's outstanding
    Outputs with ``asyncio.wait(..., FIRST_COMPLETED)`` in a loop: each round hangs a callback on every
    Output still pending and returns when any one finishes, so its cost is the pending Outputs times
    the rounds, quadratic in the resources of a plan (the round ends whenever a registration's worker
    thread finishes). Waiting here first leaves it only finished Outputs, which it passes in one round;
    it still awaits each one, so a failed Output is reported by the SDK as before. What is registered,
    and with what, does not change: only how the wait is done."""
    while True:
        with settings.SETTINGS.lock:
            outputs = [task for task in settings.SETTINGS.outputs if not task.done()]
        rpcs = [rpc for rpc in settings.SETTINGS.rpc_manager.rpcs if not asyncio.ensure_future(rpc).done()]
        if not outputs and not rpcs:
            return
        done, _ = await asyncio.wait([*outputs, *rpcs], return_when=asyncio.FIRST_EXCEPTION)
        if any(not task.cancelled() and task.exception() is not None for task in done):
            return  # the SDK's wait reports it


def _forget_program_state(*, failed: bool) -> None:
    """Pulumi keeps a program's outputs, RPCs and root stack in process-wide state (the language
    host runs one program per process). Forget them, as ``pulumi.runtime.mocks.test`` does, so a
    failed run cannot stall the next one, and collect what they held now: a failed program leaves
    futures whose exception nobody retrieved, and if the collector finalised them at a random
    later moment (inside an ``ast.parse``, say) their log message would crash CPython 3.11's
    parser. Their error is the one reported, so their "never retrieved" messages are muted."""
    settings.SETTINGS.outputs.clear()
    settings.SETTINGS.rpc_manager.clear()
    settings.set_root_resource(None)  # type: ignore[arg-type]
    if not failed:
        return  # every Output was awaited: nothing is left to finalise with an unread exception
    asyncio_logger = logging.getLogger("asyncio")
    muted, asyncio_logger.disabled = asyncio_logger.disabled, True
    try:
        gc.collect()
    finally:
        asyncio_logger.disabled = muted


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what a failed program left pending, so nothing is reported as destroyed mid-flight."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


# Manifests.


def _is_kubernetes_object(resource: Mapping[str, Any]) -> bool:
    kind = str(resource["type"])
    return (
        kind.startswith("kubernetes:")
        and not kind.startswith("kubernetes:helm")
        and not kind.startswith("pulumi:providers:")
        and isinstance(resource["inputs"].get("kind"), str)
    )


def region_of(resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The AWS region a resource belongs to: through its provider, the providers of a
    component, or its parent, up to an AWS provider's ``region`` input."""
    seen: set[str] = set()
    current: Mapping[str, Any] | None = resource
    while current is not None and current["urn"] not in seen:
        seen.add(current["urn"])
        if current["type"] == "pulumi:providers:aws":
            region = current["inputs"].get("region")
            return str(region) if region else None
        providers = current["options"].get("providers", {})
        provider = current.get("provider") or providers.get("aws") or next(iter(providers.values()), None)
        following = provider or current.get("parent")
        current = by_urn.get(following) if following else None
    return None


def manifest_files(plan: Plan) -> dict[str, str]:
    """Relative path -> YAML text for every Kubernetes object of the plan."""
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    files: dict[str, str] = {}
    for resource in plan.resources:
        if not _is_kubernetes_object(resource):
            continue
        manifest = resource["inputs"]
        metadata = manifest.get("metadata", {})
        namespace = metadata.get("namespace") or "_cluster"
        name = metadata.get("name") or resource["name"]
        region = region_of(resource, by_urn) or "_global"
        path = f"manifests/{region}/{namespace}/{manifest['kind']}-{name}.yaml"
        if path in files:
            raise ProgramError(f"two Kubernetes objects render to {path}")
        files[path] = _secret_note(manifest) + _yaml(_manifest_order(_without_secret_data(manifest)))
    return files


_SECRET_DATA = ("data", "stringData")


def _without_secret_data(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Secret's data as the plan records it is ``[secret]`` in place of a mapping, which no API
    server would take: the manifest leaves it out (``_secret_note`` says so)."""
    if manifest.get("kind") != "Secret":
        return manifest
    return {key: value for key, value in manifest.items() if not (key in _SECRET_DATA and value == SECRET)}


def _secret_note(manifest: Mapping[str, Any]) -> str:
    fields = [key for key in _SECRET_DATA if manifest.get("kind") == "Secret" and manifest.get(key) == SECRET]
    return "".join(f"# {key}: {SECRET} (Pulumi secrets, never written out)\n" for key in fields)


def _manifest_order(manifest: Mapping[str, Any]) -> dict[str, Any]:
    first = ("apiVersion", "kind", "metadata")
    head = {key: manifest[key] for key in first if key in manifest}
    return {**head, **{key: value for key, value in manifest.items() if key not in first}}


def _yaml(document: Any) -> str:
    import io

    # The C emitter (ruamel.yaml.clib, pinned): the same text as the pure one, several times faster.
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.width = 4096  # one line per value: images and annotations stay greppable
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # keep apiVersion, kind first
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    return buffer.getvalue()


PLAN_MARKER = ".fleetctl-plan"
"""Written into every plan directory: ``fleetctl plan --out`` replaces only directories it wrote."""
_MARKER_TEXT = (
    "An offline plan written by `fleetctl plan`. Writing a plan here again replaces plan.json, manifests/\n"
    "and this file; fleetctl refuses to write into a directory holding anything else.\n"
)
PLAN_ENTRIES = frozenset({"plan.json", "manifests", PLAN_MARKER})
_STAGING_PREFIX = ".fleetctl-staging-"


class PlanOutputError(ProblemsError):
    """The plan cannot go where it was asked to; nothing was written or deleted."""


def _output_problem(out: Path, message: str) -> PlanOutputError:
    return PlanOutputError([Problem(str(out), message)])


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def check_output(out: Path) -> None:
    """Refuse ``out`` unless it is a new directory, an empty one, or a plan directory: a plan
    replaces only what a plan wrote, never a file of the user's."""
    try:
        if not out.exists():
            if out.is_symlink():
                raise _output_problem(out, "is a symbolic link to nothing: give a directory")
            existing = next(parent for parent in out.absolute().parents if parent.exists())
            if not existing.is_dir():
                raise _output_problem(out, f"cannot be made: {existing} is a file, not a directory")
            return
        if not out.is_dir():
            raise _output_problem(out, "is not a directory: give a new or empty directory, or a plan directory")
        entries = sorted(entry.name for entry in out.iterdir() if not entry.name.startswith(_STAGING_PREFIX))
    except OSError as error:
        raise _output_problem(out, f"cannot read the output directory: {_reason(error)}") from None
    foreign = [name for name in entries if name not in PLAN_ENTRIES]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise _output_problem(
            out,
            f"holds files that are not a plan ({shown}); fleetctl plan writes only into a new or empty directory "
            "or a plan directory it wrote: give another --out",
        )
    if entries and PLAN_MARKER not in entries and "plan.json" not in entries:
        raise _output_problem(out, "holds a manifests/ directory but no plan: give another --out")


def write_plan(plan: Plan, out: Path) -> dict[str, str]:
    """Write the plan directory: a new one is built beside ``out`` and renamed into place; an
    empty or plan directory keeps its place and gets the new entries swapped in. Every file is
    rendered before anything is written; a refused or failed write raises PlanOutputError."""
    with full_collections_deferred():
        files = {"plan.json": plan.to_json(), **manifest_files(plan), PLAN_MARKER: _MARKER_TEXT}
    check_output(out)
    try:
        if out.exists():
            _swap_into(out, files)
        else:
            _create(out, files)
    except OSError as error:
        raise _output_problem(out, f"cannot write the plan: {_reason(error)}") from None
    return files


def _write_files(directory: Path, files: Mapping[str, str]) -> None:
    (directory / "manifests").mkdir()
    for relative, text in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _create(out: Path, files: Mapping[str, str]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with interrupt.cleanup(lambda: shutil.rmtree(staging, ignore_errors=True)):
            umask = os.umask(0)
            os.umask(umask)
            staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; the plan is an ordinary directory
            _write_files(staging, files)
            with interrupt.held():
                interrupt.checkpoint()
                os.rename(staging, out)
                interrupt.finish()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_into(out: Path, files: Mapping[str, str]) -> None:
    """Build the plan in a hidden directory inside ``out``, then move each entry into place."""
    for leftover in out.glob(f"{_STAGING_PREFIX}*"):  # an interrupted earlier write's
        shutil.rmtree(leftover, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=out))
    try:
        with interrupt.cleanup(lambda: shutil.rmtree(staging, ignore_errors=True)):
            new, old = staging / "new", staging / "old"
            new.mkdir()
            old.mkdir()
            _write_files(new, files)
            with interrupt.held():  # the old plan or the new one, never a mix of the two
                interrupt.checkpoint()
                for name in ("plan.json", "manifests", PLAN_MARKER):  # the marker last
                    if (out / name).exists() or (out / name).is_symlink():
                        os.replace(out / name, old / name)
                    os.replace(new / name, out / name)
                interrupt.finish()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def summary(plan: Plan, out: Path, files: Mapping[str, str], source: str | None = None) -> str:
    """Counts per region and type; the total is the number of resources in plan.json, the stack's
    own ``pulumi:pulumi:Stack`` resource included, as ``pulumi preview`` counts it."""
    by_urn = {resource["urn"]: resource for resource in plan.resources}
    counts: Counter[tuple[str, str]] = Counter()
    for resource in plan.resources:
        counts[(region_of(resource, by_urn) or "global", resource["type"])] += 1
    origin = f" from {source}" if source else ""
    lines = [f"plan of stack {plan.stack}{origin}: {sum(counts.values())} resources"]
    for (region, kind), count in sorted(counts.items()):
        lines.append(f"  {region:<16} {count:>4}  {kind}")
    manifests = sum(1 for path in files if path.startswith("manifests/"))
    lines.append(f"wrote {out / 'plan.json'} and {manifests} manifest(s) under {out / 'manifests'}")
    whole = whole_components.plan_note(plan.resources)
    return "\n".join([*lines, *([whole] if whole else [])])
