"""tools/venv_install.py, the one way the Makefile fills a virtualenv: uv at the exact version the constraints
pin, `uv pip install` under the constraints, wheels only, a line of progress per step, plain pip when uv
cannot be installed; and requirements.txt carrying its lock for installs that pass no -c (the Pulumi CLI's)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from benchmarks import venv_install

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "venv_install.py"
# Each virtualenv of the Makefile, its requirements and its lock.
VENVS = {
    ".venv": ("requirements.txt", "constraints.txt"),
    "policy/venv": ("policy/requirements.txt", "policy/constraints.txt"),
    "tools/checkov/venv": ("tools/checkov/requirements.txt", "tools/checkov/constraints.txt"),
}
STAMPS = (".venv/.installed", "policy/venv/.installed", "tools/checkov/venv/.installed")


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("venv_install", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script() -> ModuleType:
    return load_script()


def make_dry_run(*targets: str) -> str:
    if shutil.which("make") is None:
        pytest.fail("make is needed")
    return subprocess.run(
        ["make", "-n", "-B", *targets], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_every_virtualenv_of_the_makefile_is_filled_by_the_script() -> None:
    commands = make_dry_run(*STAMPS).splitlines()
    assert not [line for line in commands if "pip install" in line or "-m venv" in line]
    installs = [line for line in commands if "tools/venv_install.py" in line]
    for venv, (requirements, constraints) in VENVS.items():
        assert any(f"venv_install.py {venv} -r {requirements} -c {constraints}" in line for line in installs), venv
    # Every install step names its constraints (uv's pin is read from them).
    assert all(" -c " in line for line in installs)


def test_ci_builds_the_virtualenvs_through_make() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test-tools lint typecheck" in ci
    assert "pip install" not in ci
    assert "tools/venv_install.py" in make_dry_run("test-tools")


def uv_pins(path: Path) -> list[str]:
    return re.findall(r"^uv==(\S+)$", path.read_text(), re.MULTILINE)


def test_every_lock_pins_one_and_the_same_uv_exactly() -> None:
    pins = {constraints: uv_pins(ROOT / constraints) for _, constraints in VENVS.values()}
    assert all(len(found) == 1 for found in pins.values()), pins
    assert len({found[0] for found in pins.values()}) == 1, pins
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins["constraints.txt"][0])


def test_the_script_reads_the_pin_the_lock_holds(script: Any) -> None:
    (expected,) = uv_pins(ROOT / "constraints.txt")
    assert script.uv_pin([ROOT / "constraints.txt"]) == expected
    assert script.uv_pin([ROOT / "requirements.txt"]) is None


@pytest.mark.parametrize("requirements", ["requirements.txt", "policy/requirements.txt"])
def test_requirements_carry_their_lock_for_installs_without_c(requirements: str) -> None:
    """The Pulumi CLI builds a virtualenv it makes itself with `python -m pip install -r requirements.txt`
    alone (its python toolchain, sdk/python/toolchain/pip.go): the file must apply its own constraints."""
    path = ROOT / requirements
    assert "-c constraints.txt" in path.read_text().splitlines()
    assert (path.parent / "constraints.txt").is_file()


class Recorder:
    """Stands in for the script's ``run``: records each command, answers from ``failing``."""

    def __init__(self, failing: Sequence[str] = ()) -> None:
        self.commands: list[list[str]] = []
        self.failing = failing

    def __call__(self, command: Sequence[str]) -> tuple[bool, str]:
        self.commands.append(list(command))
        joined = " ".join(command)
        if any(pattern in joined for pattern in self.failing):
            return False, f"the output of {joined}\n"
        return True, "Resolved 3 packages in 10ms\nInstalled 3 packages in 5ms\n"


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv as far as the script looks: an interpreter, no uv."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    return tmp_path / "venv"


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "constraints.txt"
    path.write_text("# pinned\nfoo==1.0\nuv==0.13.9\n")
    return path


def test_uv_is_installed_from_a_wheel_then_installs_the_requirements_wheels_only(
    script: Any, venv: Path, lock: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(script, "run", recorder)
    monkeypatch.delenv("VENV_INSTALL_WITH", raising=False)
    assert script.main([str(venv), "-r", "requirements.txt", "-c", str(lock)]) == 0
    bootstrap, install = recorder.commands
    assert bootstrap[:4] == [str(venv / "bin" / "python"), "-m", "pip", "install"]
    assert "uv==0.13.9" in bootstrap
    assert bootstrap[bootstrap.index("--only-binary") + 1] == ":all:"
    assert install[:3] == [str(venv / "bin" / "uv"), "pip", "install"]
    assert install[install.index("--python") + 1] == str(venv / "bin" / "python")
    # The system's CA store, as pip uses it (a TLS-inspecting proxy's CA is there, not in uv's bundle).
    assert "--system-certs" in install
    # Byte-compiled as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing would compile them later.
    assert "--compile-bytecode" in install
    assert install[install.index("--only-binary") + 1] == ":all:"
    assert install[install.index("-r") + 1] == "requirements.txt"
    assert install[install.index("-c") + 1] == str(lock)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("venv_install: ") and re.search(r" in \d+\.\d s", line) for line in lines)
    assert "requirements.txt into" in lines[1]
    assert "with uv 0.13.9" in lines[1]
    assert "(installed 3 packages)" in lines[1]


def test_uv_already_at_the_pin_is_not_installed_again(
    script: Any, venv: Path, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (venv / "bin" / "uv").touch()
    (venv / "lib" / "python3.11" / "site-packages" / "uv-0.13.9.dist-info").mkdir(parents=True)
    recorder = Recorder()
    monkeypatch.setattr(script, "run", recorder)
    monkeypatch.delenv("VENV_INSTALL_WITH", raising=False)
    assert script.main([str(venv), "--no-deps", "-e", ".", "-c", str(lock)]) == 0
    (install,) = recorder.commands
    assert install[0] == str(venv / "bin" / "uv")
    assert "--no-deps" in install
    assert install[install.index("-e") + 1] == "."
    # A local path builds from its source: no format option for it.
    assert "--only-binary" not in install


def test_pip_installs_instead_when_uv_cannot_be_installed(
    script: Any, venv: Path, lock: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = Recorder(failing=["uv==0.13.9"])
    monkeypatch.setattr(script, "run", recorder)
    monkeypatch.delenv("VENV_INSTALL_WITH", raising=False)
    assert script.main([str(venv), "-r", "requirements.txt", "-c", str(lock)]) == 0
    _, install = recorder.commands
    assert install[:4] == [str(venv / "bin" / "python"), "-m", "pip", "install"]
    assert install[install.index("--only-binary") + 1] == ":all:"
    assert install[install.index("-c") + 1] == str(lock)
    captured = capsys.readouterr()
    assert "pip could not install uv 0.13.9" in captured.out
    assert "with pip in" in captured.out.splitlines()[-1]


def test_pip_when_asked_or_when_no_lock_pins_uv(
    script: Any, venv: Path, lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(script, "run", recorder)
    monkeypatch.setenv("VENV_INSTALL_WITH", "pip")
    assert script.main([str(venv), "-r", "requirements.txt", "-c", str(lock)]) == 0
    monkeypatch.delenv("VENV_INSTALL_WITH")
    unpinned = tmp_path / "other.txt"
    unpinned.write_text("foo==1.0\n")
    assert script.main([str(venv), "-r", "requirements.txt", "-c", str(unpinned)]) == 0
    assert [command[1:3] for command in recorder.commands] == [["-m", "pip"], ["-m", "pip"]]


def test_a_failed_install_shows_the_installers_output_and_fails(
    script: Any, venv: Path, lock: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(script, "run", Recorder(failing=["uv pip install"]))
    monkeypatch.delenv("VENV_INSTALL_WITH", raising=False)
    assert script.main([str(venv), "-r", "requirements.txt", "-c", str(lock)]) == 1
    captured = capsys.readouterr()
    assert "the output of" in captured.err
    assert "FAILED: requirements.txt with uv 0.13.9" in captured.out


def test_a_package_allowed_as_an_sdist_is_named_to_both_installers(
    script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert script.binary_options() == ["--only-binary", ":all:"]
    monkeypatch.setattr(script, "SDIST_ALLOWED", ("somepkg",))
    assert script.binary_options() == ["--only-binary", ":all:", "--no-binary", "somepkg"]


@pytest.mark.skipif(
    os.environ.get("VENV_INSTALL_NETWORK") != "1", reason="needs the package index: set VENV_INSTALL_NETWORK=1"
)
def test_a_virtualenv_built_by_the_script_is_the_lock(tmp_path: Path) -> None:
    """By hand (network): the runtime and dev requirements through the script, then `pip freeze` against
    constraints.txt line for line (uv keeps every pin; uv itself is pinned there too)."""
    venv = tmp_path / "venv"
    script = [sys.executable, str(SCRIPT), str(venv)]
    for step in (
        ["-r", "requirements.txt", "-c", "constraints.txt"],
        ["-r", "requirements-dev.txt", "-c", "constraints.txt"],
        ["--no-deps", "-r", "requirements-streamer.txt", "-c", "constraints.txt"],
    ):
        subprocess.run([*script, *step], cwd=ROOT, check=True, timeout=1800)
    assert venv_install.freeze_matches(venv, with_uv=True)


def test_the_install_benchmark_writes_its_own_section_and_the_plan_benchmark_keeps_it() -> None:
    results = [
        venv_install.Measured(installer, cache, seconds, (1.0, 2.0), "yes", (9.0, 8.0))
        for installer, cache, seconds in (
            ("pip (the old Makefile)", "empty", 150.0),
            ("pip (the old Makefile)", "warm", 60.0),
            ("tools/venv_install.py (uv)", "empty", 30.0),
            ("tools/venv_install.py (uv)", "warm", 12.0),
        )
    ]
    section = venv_install.report(results, datetime(2026, 12, 2, 14, 0, tzinfo=UTC))
    assert section.startswith(venv_install.BEGIN)
    assert section.rstrip().endswith(venv_install.END)
    assert "| tools/venv_install.py (uv) | empty | 30.0 | 9.0 | 8.0 | 1.0 -> 2.0 | yes |" in section
    assert "empty cache: 5.0x, warm cache: 5.0x" in section
    plans = "# Benchmarks\n\nplan tables\n"
    written = venv_install.spliced(plans, section)
    assert written == plans + "\n" + section
    assert venv_install.section_of(written) == section
    # Written again, the section replaces itself and leaves the rest.
    assert venv_install.spliced(written + "\n# later\n", section) == written + "\n# later\n"
