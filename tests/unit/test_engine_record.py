"""The framework-neutral engine record (docs/design.md, "The engine record")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from components.spec import EndpointRecord, EngineCapabilities, SpecError, parse_stack_config

from .stack_builders import with_classic

SECTION_6_KEYS = frozenset(
    {
        "context_length",
        "kv_cache_block_size",
        "total_kv_blocks",
        "max_num_seqs",
        "max_num_batched_tokens",
        "bos_token_id",
        "enable_prefix_caching",
        "logical_data_parallel_size",
        "prefix_caching_coordinator_policy",
    }
)
RECORD_KEYS = frozenset({"endpoint", "region", "address", "served_model_name", "capabilities"})

fast = settings(max_examples=200, deadline=None)
positive = st.none() | st.integers(min_value=1, max_value=2**63)
policies = st.none() | st.text(min_size=1, max_size=20).filter(str.strip)

capabilities = st.builds(
    EngineCapabilities,
    context_length=positive,
    kv_cache_block_size=positive,
    total_kv_blocks=positive,
    max_num_seqs=positive,
    max_num_batched_tokens=positive,
    bos_token_id=st.none() | st.integers(min_value=0, max_value=2**31),
    enable_prefix_caching=st.none() | st.booleans(),
    logical_data_parallel_size=st.integers(min_value=1, max_value=4096),
    prefix_caching_coordinator_policy=policies,
)
records = st.builds(
    EndpointRecord,
    endpoint=st.text(max_size=20),
    region=st.text(max_size=20),
    address=st.text(max_size=40),
    served_model_name=st.none() | st.text(max_size=40),
    capabilities=capabilities,
)


@fast
@given(capabilities)
def test_capabilities_round_trip_through_dict_and_json_unchanged(caps: EngineCapabilities) -> None:
    data = caps.to_dict()
    assert EngineCapabilities.from_dict(data) == caps
    through_json = json.loads(json.dumps(data))
    assert through_json == data
    assert EngineCapabilities.from_dict(through_json) == caps
    assert EngineCapabilities.from_dict(through_json).to_dict() == data


@fast
@given(records)
def test_endpoint_record_round_trips_through_dict_and_json_unchanged(record: EndpointRecord) -> None:
    data = record.to_dict()
    assert EndpointRecord.from_dict(data) == record
    assert EndpointRecord.from_dict(json.loads(json.dumps(data))) == record
    assert EndpointRecord.from_dict(json.loads(record.to_json())) == record
    assert json.loads(record.to_json()) == data


@fast
@given(records)
def test_record_carries_only_the_address_and_the_section_6_capabilities(record: EndpointRecord) -> None:
    data = record.to_dict()
    assert set(data) == RECORD_KEYS
    assert set(data["capabilities"]) <= SECTION_6_KEYS
    assert "logical_data_parallel_size" in data["capabilities"]


def test_capability_fields_are_exactly_the_section_6_list() -> None:
    assert set(EngineCapabilities.model_fields) == SECTION_6_KEYS


def test_fully_described_engine_exports_every_section_6_key() -> None:
    caps = EngineCapabilities(
        context_length=32768,
        kv_cache_block_size=16,
        total_kv_blocks=4096,
        max_num_seqs=256,
        max_num_batched_tokens=8192,
        bos_token_id=1,
        enable_prefix_caching=True,
        logical_data_parallel_size=2,
        prefix_caching_coordinator_policy="consistent_hash",
    )
    assert set(caps.to_dict()) == SECTION_6_KEYS


def test_empty_capabilities_default_to_one_data_parallel_engine() -> None:
    assert EngineCapabilities().to_dict() == {"logical_data_parallel_size": 1}


def test_bos_token_id_zero_is_accepted() -> None:
    assert EngineCapabilities.from_dict({"bos_token_id": 0}).bos_token_id == 0


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"bos_token_id": -1}, "bos_token_id"),
        ({"context_length": 0}, "context_length"),
        ({"logical_data_parallel_size": 0}, "logical_data_parallel_size"),
        ({"max_num_seqs": True}, "max_num_seqs"),
        ({"enable_prefix_caching": "yes"}, "enable_prefix_caching"),
        ({"prefix_caching_coordinator_policy": "  "}, "prefix_caching_coordinator_policy"),
        ({"max_model_len": 4096}, "max_model_len"),
    ],
    ids=[
        "negative_bos_token_id",
        "zero_context_length",
        "zero_logical_data_parallel_size",
        "boolean_count",
        "string_for_a_boolean",
        "blank_policy",
        "framework_specific_key",
    ],
)
def test_rejects_invalid_capabilities(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EngineCapabilities.from_dict(data)
    assert [error["loc"] for error in caught.value.errors()] == [(field,)]


def test_a_record_exported_before_the_served_model_name_reads_as_none() -> None:
    old = {"endpoint": "chat", "region": "us-east-1", "address": "http://chat", "capabilities": {}}
    assert EndpointRecord.from_dict(old).served_model_name is None


def test_record_rejects_framework_specific_fields() -> None:
    data = EndpointRecord(endpoint="chat", region="us-east-1", address="http://chat").to_dict()
    with pytest.raises(ValidationError):
        EndpointRecord.from_dict({**data, "vllm_args": ["--max-model-len", "4096"]})


@pytest.mark.parametrize(
    ("engine", "path", "fragment"),
    [
        ({"bos_token_id": -1}, "endpoints.chat.engine.bos_token_id", "must be an integer >= 0, got -1"),
        ({"context_length": 0}, "endpoints.chat.engine.context_length", "must be an integer >= 1, got 0"),
        (
            {"logical_data_parallel_size": 0},
            "endpoints.chat.engine.logical_data_parallel_size",
            "must be an integer >= 1, got 0",
        ),
    ],
    ids=["negative_bos_token_id", "zero_context_length", "zero_logical_data_parallel_size"],
)
def test_stack_config_reports_invalid_engine_fields_at_their_path(
    engine: dict[str, Any], path: str, fragment: str
) -> None:
    with pytest.raises(SpecError) as caught:
        parse_stack_config(with_classic({"engine": engine}))
    [problem] = caught.value.problems
    assert problem.path == path
    assert fragment in problem.message


def test_stack_config_keeps_the_engine_description() -> None:
    spec = parse_stack_config(with_classic({"engine": {"context_length": 32768, "bos_token_id": 0}}))
    engine = spec.endpoints["chat"].engine
    assert engine is not None
    assert engine.to_dict() == {"context_length": 32768, "bos_token_id": 0, "logical_data_parallel_size": 1}
