"""The report of ``python -m benchmarks.front``: every front (harness.py) started once in front of the shared
stand-ins, then measured round by round, the fronts interleaved (each round starting one front later), the
rounds pooled; writes its section of benchmarks/RESULTS.md between the markers below, the rest of the file
left as it is."""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from benchmarks import sections
from benchmarks.front import build, harness
from benchmarks.front.harness import Front, Load

BEGIN = "<!-- front data path: python -m benchmarks.front -->"
END = "<!-- end of front data path -->"
RESULTS = Path(__file__).resolve().parents[1] / "RESULTS.md"
DIRECT = "direct"
Runs = dict[str, dict[str, list[Load]]]
"""Per front, per scenario: its runs, one per round."""


@dataclass(frozen=True)
class Parameters:
    rounds: int = 3
    concurrency: int = 64
    seconds: float = 3.0
    """Each loaded run (c=64, plain and streamed)."""
    latency_seconds: float = 2.0
    """Each c=1 run."""
    tokens: int = 16
    """max_tokens of a plain completion (the stand-in's answer holds that many characters)."""
    stream_tokens: int = 100
    """Events per streamed answer."""
    warmup_requests: int = 512
    """Sent at c=64 before each front's runs of a round, not measured (pools filled, code paths warm)."""


SCENARIOS = ("plain", "stream", "latency")


def arguments_of(scenario: str, parameters: Parameters) -> list[str]:
    c, seconds = str(parameters.concurrency), f"{parameters.seconds}s"
    if scenario == "plain":
        return ["-c", c, "-duration", seconds, "-tokens", str(parameters.tokens)]
    if scenario == "stream":
        return ["-c", c, "-duration", seconds, "-stream", "-tokens", str(parameters.stream_tokens)]
    return ["-c", "1", "-duration", f"{parameters.latency_seconds}s", "-tokens", str(parameters.tokens)]


def fronts(stand: harness.Standins, logs: Path) -> list[Front]:
    direct = Front(DIRECT, False, stand.server)
    return [
        direct,
        harness.ours(False, stand, logs),
        harness.nginx(stand, logs),
        harness.vllm_router(False, stand, logs),
        harness.ours(True, stand, logs),
        harness.vllm_router(True, stand, logs),
        harness.vllm_example(stand, logs),
    ]


def measure(parameters: Parameters, logs: Path) -> tuple[list[Front], Runs, dict[str, object]]:
    paths = build.binaries()
    stand = harness.standins(paths["standin"], logs)
    processes = list(stand.processes)
    with harness.stopped_at_exit(processes):
        every = fronts(stand, logs)
        processes += [front.process for front in every if front.process is not None]
        running = [front for front in every if front.reason is None]
        runs: Runs = {front.name: {s: [] for s in SCENARIOS} for front in running}
        for round_ in range(parameters.rounds):
            order = running[round_ % len(running) :] + running[: round_ % len(running)]
            for front in order:
                warm = ["-c", str(parameters.concurrency), "-n", str(parameters.warmup_requests)]
                harness.load(paths["load"], front, warm)
                for scenario in SCENARIOS:
                    result = harness.load(paths["load"], front, arguments_of(scenario, parameters))
                    runs[front.name][scenario].append(result)
                    print(f"round {round_ + 1} {front.name} {scenario}: {result}", file=sys.stderr, flush=True)
        return every, runs, stand.stats()


def machine() -> str:
    names = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    model = names[0] if names else platform.processor() or "unknown CPU"
    cores = os.cpu_count()
    go = subprocess.run([build.go(), "version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{model}, {cores} cores, Linux {platform.release()}; Python {platform.python_version()} with aiohttp "
        f"{aiohttp.__version__} (our front); {go}"
    )


def pooled_ms(loads: list[Load], per: float, count: str) -> str:
    done = sum(getattr(run, count) for run in loads)
    return f"{1000 * sum(run.cpu_seconds for run in loads) / done * per:,.0f}" if done else "—"


def errors_of(loads: dict[str, list[Load]]) -> str:
    errors = sum(run.errors for scenario in loads.values() for run in scenario)
    first = next((run.first_error for scenario in loads.values() for run in scenario if run.first_error), "")
    return f"{errors} ({first[:120]})" if errors else "0"


def section(parameters: Parameters, every: list[Front], runs: Runs, stats: dict[str, object], took: float) -> str:
    direct = runs[DIRECT]
    direct_p50 = statistics.median(run.p50_ms for run in direct["latency"])
    lines = [
        BEGIN,
        "# Front data path: what a request costs in each front",
        "",
        f"Generated by `python -m benchmarks.front` ({took / 60:.1f} min). On loopback, in one run, against instant",
        "compiled stand-ins (benchmarks/front/go/standin: a vLLM-shaped completion answered at once, or",
        "`max_tokens` server-sent events each flushed on its own, then `[DONE]`); load from a compiled generator",
        "(benchmarks/front/go/load, a process of its own: c workers with a keep-alive connection each, back to",
        "back). Every front is started once, then each round runs every front in turn (the first one a step",
        "later each round), each a warm-up then its three runs; the rounds are pooled.",
        "",
        f"Machine: {machine()}. The load generator and the stand-ins share the machine's cores with the front,",
        "so the throughput is what the front reaches with two loaded cores; the CPU a request costs the front is",
        "the figure that holds elsewhere.",
        "",
        "Parameters: "
        + ", ".join(f"{field.name} {getattr(parameters, field.name)}" for field in dataclasses.fields(parameters))
        + ". No random choices: the same prompt every request; durations fixed, counts measured.",
        "",
        "*CPU*: utime + stime of the front's process and its descendants (nginx's workers) from /proc/PID/stat,",
        "the difference across each run, summed over the rounds and divided by the requests (events) answered",
        "whole in them. *plain*: c concurrent non-streamed completions. *streamed*: c concurrent streams of",
        f"{parameters.stream_tokens} events. *max req/s*: plain requests answered over the runs' time. *added p50*:",
        f"the median over rounds of each c=1 run's p50, less direct's ({direct_p50:.3f} ms); a P/D front makes two",
        "requests of stand-ins per request (prefill, then decode; vLLM's example sends both at once), so part of",
        "its added latency is the second hop. *p99*: the median over rounds of the plain c=64 runs' p99.",
        "",
        f"| front | CPU ms / 1k requests (c={parameters.concurrency}) | CPU ms / 100k streamed chunks "
        f"| max req/s (c={parameters.concurrency}) | added p50 (c=1) ms "
        f"| p99 (c={parameters.concurrency}) ms | errors |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for front in every:
        if front.reason is not None:
            lines.append(f"| {front.name} | not run here: {front.reason[:300]} | | | | | |")
            continue
        loads = runs[front.name]
        plain, stream, latency = loads["plain"], loads["stream"], loads["latency"]
        rate = sum(run.requests for run in plain) / sum(run.seconds for run in plain)
        p50 = statistics.median(run.p50_ms for run in latency)
        added = "(the floor)" if front.name == DIRECT else f"{p50 - direct_p50:+.3f}"
        cpu_plain = "—" if front.name == DIRECT else pooled_ms(plain, 1000, "requests")
        cpu_stream = "—" if front.name == DIRECT else pooled_ms(stream, 100_000, "chunks")
        p99 = statistics.median(run.p99_ms for run in plain)
        lines.append(
            f"| {front.name} | {cpu_plain} | {cpu_stream} | {rate:,.0f} | {added} | {p99:.1f} | {errors_of(loads)} |"
        )
    lines += ["", "Fronts as run:", ""]
    lines += [f"- {front.name}: {'; '.join(front.notes)}" for front in every if front.notes]
    lines += [
        "",
        f"The stand-ins' own counts at the end (a refused request is a front sending what vLLM would refuse): {stats}",
        "",
        END,
    ]
    return "\n".join(lines) + "\n"


def spliced(existing: str, front: str) -> str:
    return sections.spliced(existing, front, BEGIN, END)


def section_of(existing: str) -> str:
    """The front section of ``existing`` (empty when it has none), for benchmarks/run.py to keep."""
    return sections.section_of(existing, BEGIN, END)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=Parameters.rounds)
    parser.add_argument("--seconds", type=float, default=Parameters.seconds)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--logs", type=Path, help="keep the fronts' logs and nginx's files here (else a temp dir)")
    arguments = parser.parse_args(argv)
    parameters = Parameters(rounds=arguments.rounds, seconds=arguments.seconds)
    started = time.monotonic()
    if arguments.logs is not None:
        arguments.logs.mkdir(parents=True, exist_ok=True)
        every, runs, stats = measure(parameters, arguments.logs)
    else:
        with tempfile.TemporaryDirectory(prefix="front-bench-") as directory:
            every, runs, stats = measure(parameters, Path(directory))
    text = section(parameters, every, runs, stats, time.monotonic() - started)
    existing = arguments.out.read_text() if arguments.out.exists() else ""
    arguments.out.write_text(spliced(existing, text))
    print(text)
    return 0
