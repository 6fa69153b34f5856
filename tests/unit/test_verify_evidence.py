"""The pods' own words, as fleetctl verify reads them: request counters in Prometheus text,
vLLM's KV connector stats lines, the Mooncake master's summary, the transfer engine's devices.
(The master's and the engine's real output is held to the same functions in tests/e2e.)"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

from fleetctl.verify import evidence

VLLM_LINE = (
    "INFO 11-29 19:30:01 [loggers.py:248] KVConnectorType: MooncakeConnector, KV Transfer metrics: "
    "Num successful transfers={ok}, Avg xfer time (ms)=2.113, P90 xfer time (ms)=2.113, Avg MB per transfer=36.0, "
    "Throughput (MB/s)=17037.387, Avg number of descriptors=36.0, Num failed transfers={failed}, "
    "Num failed recvs={recvs}, Num KV expired reqs=0"
)


def exposition() -> str:
    registry = CollectorRegistry()
    counter = Counter(
        "vllm:request_success", "Requests.", ["model_name", "engine", "finished_reason"], registry=registry
    )
    counter.labels("qwen", "0", "stop").inc(3)
    counter.labels("qwen", "0", "length").inc(4)
    return generate_latest(registry).decode()


def test_a_counter_is_summed_over_its_labels_without_its_created_timestamps() -> None:
    text = exposition()
    assert "vllm:request_success_created" in text  # a timestamp in seconds: must not count
    assert evidence.counter_total(text, "vllm:request_success") == 7


def test_a_counter_without_the_total_suffix_counts_too() -> None:
    text = "# HELP tgi_request_success Number of successful requests\n# TYPE tgi_request_success counter\n"
    assert evidence.counter_total(text + "tgi_request_success 12\n", "tgi_request_success") == 12


def test_an_absent_counter_is_none_not_zero() -> None:
    assert evidence.counter_total(exposition(), "sglang:num_requests") is None
    assert evidence.counter_total("", "vllm:request_success") is None


def test_connector_stats_lines_count_transfers_and_failures() -> None:
    log = "\n".join(
        [
            "INFO 11-29 19:29:51 [loggers.py:236] Engine 000: Avg prompt throughput: 61.0 tokens/s",
            VLLM_LINE.format(ok=2, failed=0, recvs=0),
            VLLM_LINE.format(ok=1, failed=1, recvs=2),
        ]
    )
    assert evidence.transfers(log) == evidence.Transfers(successful=3, failed=3)


def test_stats_nested_per_connector_under_multiconnector_count_too() -> None:
    nested = (
        "KVConnectorType: MultiConnector, KV Transfer metrics: MooncakeConnector={'Num successful transfers': 4, "
        "'Num failed transfers': 0, 'Num failed recvs': 0}"
    )
    assert evidence.transfers(nested) == evidence.Transfers(successful=4, failed=0)


def test_numbers_outside_stats_lines_are_not_transfers() -> None:
    assert evidence.transfers("DEBUG Num successful transfers=9 (a line of another logger)") == evidence.Transfers(0, 0)


def test_the_master_summary_shows_stored_objects_by_single_or_batch_put_ends() -> None:
    line = "I1129 master_admin_service.cpp:301] Master Admin Metrics: role=leader, master={{{body}}}"
    quiet = "PutStart=0.00/0.00, PutEnd=0.00/0.00 | Batch: PutEnd:(Req=0.00/0.00/0.00, Item=0.00/0.00)"
    single = "PutStart=0.30/0.30, PutEnd=0.30/0.30 | Batch: PutEnd:(Req=0.00/0.00/0.00, Item=0.00/0.00)"
    batch = "PutStart=0.00/0.00, PutEnd=0.00/0.00 | Batch: PutEnd:(Req=0.10/0.00/0.10, Item=3.20/3.20)"
    assert not evidence.store_puts(line.format(body=quiet))
    assert evidence.store_puts(line.format(body=single))
    assert evidence.store_puts(line.format(body=batch))
    assert not evidence.store_puts("PutEnd=0.30/0.30 outside the master's summary")


def test_the_transport_is_what_the_engine_says_it_installed() -> None:
    found = "Topology discovery complete. Found 32 HCAs.\ninstallTransport, type=rdma\n"
    none = "Topology discovery complete. Found 0 HCAs.\n"
    assert evidence.transport(found) == "rdma"
    assert evidence.transport(none) == "tcp"
    assert evidence.transport(found + "TcpTransport: listen on port 16217\n") == "tcp"
    assert evidence.transport("Topology discovery complete with specified devices. Found 4 HCAs.") == "rdma"
    assert evidence.transport("vLLM API server started") is None
