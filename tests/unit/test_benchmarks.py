"""The benchmark harness itself (benchmarks/): its report reads the goals from the figures, the
profile table shares a built-in's time among its callers, and the bare registration registers a
replay under plain mocks. Small inputs only: no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import profiles
from benchmarks.records import ONE_RUN_FROM, Case, Run
from benchmarks.report import edit_section, goals, per_extra_resource
from benchmarks.run import ROOT, estimated_seconds, repeats_for


def _run(total: float, resources: int = 100, peak: float = 200.0) -> Run:
    return Run(
        total_s=total,
        program_s=total,
        write_s=0.0,
        import_s=1.0,
        resources=resources,
        custom=resources - 1,
        peak_mib=peak,
        baseline_mib=130.0,
        types={},
    )


def _case(endpoints: int, resources: int, ours: float, floor: float, bare: float, edit: float | None = None) -> Case:
    return Case(
        endpoints=endpoints,
        regions=1,
        ours=(_run(ours, resources, 250.0),),
        floor=(_run(floor, resources, 200.0),),
        bare=(_run(bare, resources, 180.0),),
        edits=() if edit is None else (_run(edit),),
    )


CASES = [
    _case(10, 1_000, ours=2.0, floor=1.8, bare=1.0, edit=2.2),
    _case(100, 10_000, ours=20.0, floor=17.0, bare=10.0),
    _case(400, 40_000, ours=86.0, floor=70.0, bare=40.0),
]


def test_the_goals_are_read_from_the_figures() -> None:
    lines = goals(CASES)
    assert "- ours / floor <= 1.3 on every row: largest 1.23 (holds) at N=400, R=1." in lines
    # Per extra resource: (20-2)/9000 against (10-1)/9000 = 2.0; (86-20)/30000 against 30/30000 = 2.2.
    assert any("largest 2.20 (does not hold) (R=1, N 100 -> 400)" in line for line in lines)
    # Slope: 2.2 ms against 2.0 ms = 1.10.
    assert any("R=1: per-resource slope" in line and "1.10 (holds)" in line for line in lines)
    assert any("peak RSS <= 1.3x the floor: largest 1.25 (holds)" in line for line in lines)
    assert any("an edit's --plan <= 1.2x one plan: largest 1.10 (holds) at N=10" in line for line in lines)


def test_per_extra_resource_and_edit_tables_show_each_step_and_edit() -> None:
    table = per_extra_resource(CASES)
    assert "| 1 | 10 -> 100 | 1000 -> 10000 | 2.00 | 1.69 | 1.00 | 2.00 | 1.69 |" in table
    assert "| 1 | 100 -> 400 | 10000 -> 40000 | 2.20 | 1.77 | 1.00 | 2.20 | 1.77 |" in table
    assert "| 10 | 1 | 1000 | 2.00 | 2.20 | 1.10 |" in edit_section(CASES)
    assert edit_section(CASES[1:]) == []


def test_a_large_case_is_estimated_from_the_largest_measured_by_placements() -> None:
    spent = {(10, 1): 2.0, (400, 1): 100.0, (100, 3): 90.0}
    assert estimated_seconds(spent, 1000, 3) == 100.0 * 3000 / 400 * 1.25
    assert estimated_seconds({}, 1000, 3) == 0.0


def test_large_cases_run_once() -> None:
    assert repeats_for(400, 1, 3) == 1 == repeats_for(1000, 3, 3)
    assert repeats_for(100, 3, 3) == 3
    assert 400 >= ONE_RUN_FROM > 300


class _Stats:
    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats


def test_a_builtins_time_is_shared_among_its_callers_parts() -> None:
    ours = ("/x/components/render/pods.py", 1, "pods")
    sdk = ("/x/site-packages/pulumi/output.py", 1, "apply")
    builtin = ("~", 0, "<built-in method builtins.isinstance>")
    stats = {
        ours: (1, 1, 0.5, 1.0, {}),
        sdk: (1, 1, 0.25, 1.0, {}),
        builtin: (4, 4, 1.0, 1.0, {ours: (3, 3, 0.3, 0.3), sdk: (1, 1, 0.1, 0.1)}),
    }
    parts = profiles.parts(_Stats(stats))  # type: ignore[arg-type]
    assert parts["our components (components/)"] == 0.5 + 0.75
    assert parts["Pulumi Outputs (pulumi/output.py)"] == 0.25 + 0.25
    table = profiles.table(parts, {"Pulumi Outputs (pulumi/output.py)": 0.5})
    assert table[2] == "| our components (components/) | 1.25 | 0.00 | +1.25 | 100% |"


def test_the_bare_registration_registers_a_replay_under_plain_mocks(tmp_path: Path) -> None:
    stack = "urn:pulumi:bench::inference-fleet::pulumi:pulumi:Stack::bench"
    provider = "urn:pulumi:bench::inference-fleet::pulumi:providers:aws::aws-us-east-1"
    component = "urn:pulumi:bench::inference-fleet::inference-fleet:fleet:Fleet::fleet"
    bucket = "urn:pulumi:bench::inference-fleet::inference-fleet:fleet:Fleet$aws:s3/bucket:Bucket::b"
    resources: list[dict[str, Any]] = [
        {"urn": stack, "type": "pulumi:pulumi:Stack", "name": "bench", "parent": None, "custom": False},
        {"urn": provider, "type": "pulumi:providers:aws", "name": "aws-us-east-1", "parent": stack, "custom": True},
        {"urn": component, "type": "inference-fleet:fleet:Fleet", "name": "fleet", "parent": stack, "custom": False},
        {
            "urn": bucket,
            "type": "aws:s3/bucket:Bucket",
            "name": "b",
            "parent": component,
            "provider": provider,
            "custom": True,
            "inputs": {"bucket": "b"},
        },
    ]
    for resource in resources:
        resource.setdefault("inputs", {"region": "us-east-1"} if resource["custom"] else {})
        resource.setdefault("options", {})
        resource.setdefault("provider", None)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"resources": resources}))
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"kind": "bare", "plan_json": str(plan), "preload": []}))
    subprocess.run([sys.executable, "-m", "benchmarks.run", "--child", str(job)], cwd=ROOT, check=True)
    result = json.loads(job.with_suffix(".result.json").read_text())
    assert (result["resources"], result["custom"]) == (4, 2)


def test_the_prod_edit_section_reads_the_goal_from_the_cold_figure() -> None:
    from benchmarks.prod_edit import GOAL_COLD_S, Preview, section

    missed = section(Preview(cold_s=GOAL_COLD_S + 5, warm_s=4.0, profile=(("a.py:1(f)", 1.5, 64000),)))
    assert f"Cold: {GOAL_COLD_S + 5:.1f} s, goal {GOAL_COLD_S:.0f} s: missed." in missed
    assert "| `a.py:1(f)` | 1.50 | 64000 |" in missed
    assert f"Cold: {GOAL_COLD_S - 1:.1f} s, goal {GOAL_COLD_S:.0f} s: held." in section(Preview(GOAL_COLD_S - 1, 1.0))
    assert section(None) == []


def test_the_profile_rows_are_the_functions_with_most_own_time(tmp_path: Path) -> None:
    import cProfile

    from benchmarks.prod_edit import top_functions

    def busy() -> int:
        return sum(range(200_000))

    profiler = cProfile.Profile()
    profiler.runcall(busy)
    profiler.dump_stats(tmp_path / "p.prof")
    rows = top_functions(tmp_path / "p.prof", rows=2)
    assert len(rows) == 2
    assert rows[0][1] >= rows[1][1]
    assert any("busy" in name or "sum" in name for name, _, _ in rows)
