"""Adversarial stack files: generated valid configs and mutated ones (wrong types, booleans
for integers, floats for byte sizes, huge numbers, control and bidi characters in names,
unknown keys, missing blocks, duplicate keys, anchors, tags, bombs, huge files).

`fleetctl validate` and `fleetctl plan` either accept, or reject with `error:` lines and
exit 1: never a traceback, never a partial plan directory, never a hang (each case runs
under an alarm).
"""

from __future__ import annotations

import contextlib
import io
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from fleetctl.cli import main as fleetctl
from tests.unit.stack_builders import classic_endpoint, mooncake_endpoint, region, stack_config

VALIDATE_SECONDS = 10
PLAN_SECONDS = 60


@contextlib.contextmanager
def bounded(seconds: int) -> Iterator[None]:
    """Fail the case, rather than hang the suite, when it runs longer than ``seconds``."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"a case ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(*argv: str, seconds: int) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with bounded(seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = fleetctl(list(argv))
    return code, out.getvalue(), err.getvalue()


def assert_clean_outcome(code: int, out: str, err: str) -> None:
    assert code in (0, 1), (code, err)
    assert "Traceback" not in out + err
    if code == 1:
        lines = err.splitlines()
        assert lines, "a rejection says why"
        assert all(line.startswith("error: ") for line in lines), err


def base_config() -> dict[str, Any]:
    return stack_config(
        regions={"us-east-1": region({"cold_tier": {"enabled": True}})},
        endpoints={
            "chat": classic_endpoint({"replicas": 1, "canary": {"image": "vllm/vllm-openai:v0.34.0", "weight": 20}}),
            "pd": mooncake_endpoint({"mooncake": {"store": {"cold_tier_enabled": True}, "mode": "both"}}),
        },
    )


def write(path: Path, config: dict[str, Any], *, suffix: str = "") -> Path:
    document = {"config": {f"inference-fleet:{key}": value for key, value in config.items()}}
    buffer = io.StringIO()
    YAML(typ="safe", pure=True).dump(document, buffer)
    path.write_text(buffer.getvalue() + suffix)
    return path


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


NASTY_TEXT = st.text(
    alphabet=st.sampled_from(["a", "-", "1", ".", "/", " ", "\x00", "\x07", "\x1b", "\u202e", "é", "漢", "\n"]),
    max_size=12,
)
WRONG_VALUES = st.one_of(
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    NASTY_TEXT,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(NASTY_TEXT, st.integers(), max_size=2),
)


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    config = base_config()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(paths(config)))
        parent: Any = config
        for step in where[:-1]:
            parent = parent[step]
        key = where[-1]
        action = draw(st.sampled_from(["replace", "delete", "unknown-key", "rename"]))
        if action == "replace":
            parent[key] = draw(WRONG_VALUES)
        elif action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "unknown-key" and isinstance(parent, dict):
            parent[draw(NASTY_TEXT) or "extra"] = draw(WRONG_VALUES)
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(NASTY_TEXT)] = parent.pop(key)
        if not paths(config):
            break
    return config


@st.composite
def valid_variants(draw: st.DrawFn) -> dict[str, Any]:
    """The base config with counts and weights drawn within what the node groups hold."""
    config = base_config()
    chat = config["endpoints"]["chat"]
    chat["replicas"] = draw(st.integers(min_value=0, max_value=2))
    chat["canary"]["weight"] = draw(st.integers(min_value=1, max_value=99))
    topology = config["endpoints"]["pd"]["mooncake"]["topology"]
    topology["prefill"] = draw(st.integers(min_value=1, max_value=2))
    topology["decode"] = draw(st.integers(min_value=1, max_value=2))
    return config


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=mutated_configs())
def test_validate_accepts_or_rejects_every_mutated_config_with_error_lines(
    tmp_path: Path, config: dict[str, Any]
) -> None:
    path = write(tmp_path / "Pulumi.fuzz.yaml", config)
    assert_clean_outcome(*run("validate", "--stack-file", str(path), seconds=VALIDATE_SECONDS))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=st.one_of(mutated_configs(), valid_variants()))
def test_plan_writes_a_whole_plan_or_nothing(tmp_path: Path, config: dict[str, Any]) -> None:
    case = Path(tempfile.mkdtemp(dir=tmp_path))  # tmp_path is shared by every example of a run
    path = write(case / "Pulumi.fuzz.yaml", config)
    out = case / "plan"
    code, printed, err = run("plan", "--stack-file", str(path), "--out", str(out), seconds=PLAN_SECONDS)
    assert_clean_outcome(code, printed, err)
    if code == 0:
        assert (out / "plan.json").exists()
    else:
        assert not out.exists(), "a rejected config writes no file"


def test_the_unmutated_base_config_plans(tmp_path: Path) -> None:
    path = write(tmp_path / "Pulumi.fuzz.yaml", base_config())
    code, _, err = run("plan", "--stack-file", str(path), "--out", str(tmp_path / "plan"), seconds=PLAN_SECONDS)
    assert code == 0, err


RAW_CASES = {
    "billion-laughs": "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    + "config: *i\n",
    "python-tag": "config:\n  inference-fleet:regions: !!python/object/apply:os.system [echo owned]\n",
    "duplicate-region": "config:\n  inference-fleet:regions:\n    us-east-1: {}\n    us-east-1: {}\n",
    "merge-key": "base: &base {min_size: 1}\nconfig:\n  inference-fleet:regions:\n    us-east-1:\n      <<: *base\n",
    "not-a-mapping": "- just\n- a list\n",
    "empty": "",
    "binary": "\x00\x01\x02config",
    "deep-nesting": "config: " + "[" * 5000 + "]" * 5000 + "\n",
    "huge-file": "config:\n  inference-fleet:regions: {}\n" + "# padding\n" * 200_000,
}


@pytest.mark.parametrize("text", list(RAW_CASES.values()), ids=list(RAW_CASES))
def test_hostile_yaml_is_refused_with_a_clear_error_and_quickly(tmp_path: Path, text: str) -> None:
    path = tmp_path / "Pulumi.hostile.yaml"
    path.write_text(text)
    code, out, err = run("validate", "--stack-file", str(path), seconds=VALIDATE_SECONDS)
    assert code == 1
    assert_clean_outcome(code, out, err)
    code, out, err = run("plan", "--stack-file", str(path), "--out", str(tmp_path / "plan"), seconds=PLAN_SECONDS)
    assert code == 1
    assert not (tmp_path / "plan").exists()
