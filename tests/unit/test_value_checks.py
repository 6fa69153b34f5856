"""Values that parse but would not run are refused with their field and the fix
(components/spec/value_checks.py): no GPU for vLLM's CUDA build, a context past the model's, a canary
that is its primary."""

from __future__ import annotations

from components.spec import parse_stack_config

from .stack_builders import IMAGE, with_classic, with_mooncake
from .test_spec_rules import CPU_IMAGE, only_problem, rejected


def test_gpu_count_0_on_vllms_cuda_image_is_refused() -> None:
    problem = only_problem(with_classic({"gpu_count": 0, "node_group": "system"}))
    assert problem.path == "endpoints.chat.gpu_count"
    assert "vLLM's CUDA build" in problem.message
    assert "gpu_count 1 or more" in problem.message


def test_gpu_count_0_on_a_cpu_build_of_vllm_is_allowed() -> None:
    parse_stack_config(with_classic({"gpu_count": 0, "node_group": "system", "image": CPU_IMAGE}))


def test_a_split_endpoint_without_gpus_is_refused_once_at_its_own_field() -> None:
    problems = [problem for problem in rejected(with_mooncake({"gpu_count": 0})) if "CUDA build" in problem.message]
    assert [problem.path for problem in problems] == ["endpoints.chat.gpu_count"]  # both roles inherit it


def test_a_context_past_the_models_is_refused_naming_the_bound() -> None:
    problem = only_problem(with_classic({"model": "Qwen/Qwen3-8B", "engine": {"context_length": 99999999999}}))
    assert problem.path == "endpoints.chat.engine.context_length"
    assert "Qwen/Qwen3-8B takes at most 40960" in problem.message
    assert "set at most 40960" in problem.message


def test_the_models_own_context_is_accepted() -> None:
    parse_stack_config(with_classic({"model": "Qwen/Qwen3-8B", "engine": {"context_length": 40960}}))


def test_a_context_past_the_stated_kv_cache_is_refused() -> None:
    engine = {"context_length": 5000, "total_kv_blocks": 100, "kv_cache_block_size": 16}
    problem = only_problem(with_classic({"engine": engine}))
    assert problem.path == "endpoints.chat.engine.context_length"
    assert "holds 1600" in problem.message


def test_a_canary_with_the_primarys_image_is_refused() -> None:
    problem = only_problem(with_classic({"canary": {"image": IMAGE}}))
    assert problem.path == "endpoints.chat.canary.image"
    assert "fleetctl canary rollback NAME" in problem.message


def test_a_mooncake_canary_set_of_another_topology_may_share_the_image() -> None:
    parse_stack_config(with_mooncake({"canary": {"image": IMAGE, "topology": {"decode": 2}}}))
