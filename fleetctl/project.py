"""Which stack file ``--stack NAME`` (or no ``--stack``) means, found as the pulumi CLI finds it.

The sources, in pulumi/pulumi:

- the project is the nearest ``Pulumi.json``, ``Pulumi.yaml`` or ``Pulumi.yml`` (in that order)
  in the working directory or above it (sdk/go/common/workspace/paths.go ``DetectProjectPathFrom``,
  sdk/go/common/encoding ``Exts``);
- a stack's file is ``Pulumi.<stack><the project file's extension>`` in the project's
  ``stackConfigDir`` (or the legacy string ``config``), else beside the project file
  (paths.go ``ProjectStackPath``; project.go ``RewriteConfigPathIntoStackConfigDir``);
- a stack reference is ``stack``, ``org/stack`` or ``org/project/stack``; the file is named after
  the stack part alone, and a project part must be the project's name
  (pkg/backend/httpstate/backend.go ``parseStackName``, pkg/backend/diy/store.go ``ParseReference``,
  pkg/backend/backend.go ``CurrentProjectContradictsWorkspace``, sdk/go/common/tokens/stack_name.go);
- without ``--stack``, ``PULUMI_STACK``, else the stack ``pulumi stack select`` stored in
  ``$PULUMI_HOME/workspaces/<project>-<sha1 of the project file's path>-workspace.json``
  (default home ``~/.pulumi``): ``{"stacks": {<backend URL>: <org/project/stack>}}``, or the
  older ``{"stack": ...}`` (pkg/backend/state/stacks.go ``getCurrentStackName``,
  pkg/workspace/workspace.go ``settingsPath``, pkg/workspace/settings.go). The backend is
  ``PULUMI_BACKEND_URL``, else the project's ``backend.url``, else the ``current`` of
  ``$PULUMI_HOME/credentials.json`` (pkg/workspace/creds.go ``GetCurrentCloudURLWithSource``).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from components.spec.errors import Problem
from fleetctl.stackfile import StackFileError

PROJECT_NAME = "inference-fleet"
PROJECT_FILE_EXTENSIONS = (".json", ".yaml", ".yml")
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""tokens.ParseStackName: letters, digits, ``_``, ``.``, ``-``; at most 100 characters."""


@dataclass(frozen=True)
class Project:
    file: Path
    """The project file as Pulumi names it: absolute, symbolic links not resolved."""
    name: str
    stack_config_dir: Path
    backend_url: str | None

    def stack_file(self, stack: str) -> Path:
        return self.stack_config_dir / f"Pulumi.{stack}{self.file.suffix}"

    def stacks(self) -> list[str]:
        """The stacks that have a file, for messages."""
        prefix, suffix = "Pulumi.", self.file.suffix
        try:
            names = [path.name for path in self.stack_config_dir.iterdir()]
        except OSError:
            return []
        return sorted(
            name[len(prefix) : -len(suffix)]
            for name in names
            if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix)
        )


@dataclass(frozen=True)
class ResolvedStack:
    name: str
    path: Path
    project: Project
    chosen_by: str
    """How the stack was chosen: ``--stack``, ``PULUMI_STACK`` or the workspace file that selects it."""

    @property
    def explicit(self) -> bool:
        return self.chosen_by == "--stack"


def _refuse(where: Path | str, message: str) -> StackFileError:
    return StackFileError([Problem(str(where), message)])


def working_directory() -> Path:
    """The working directory as Go's ``os.Getwd`` gives it to pulumi: ``$PWD`` when it names the
    current directory (the path the shell took, symbolic links kept), else the resolved one."""
    here = os.getcwd()
    pwd_env = os.environ.get("PWD", "")
    try:
        if os.path.isabs(pwd_env) and os.path.samefile(pwd_env, "."):
            return Path(os.path.normpath(pwd_env))
    except OSError:
        pass
    return Path(here)


def relative_to_here(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it, as people type it (so the
    lines of a command, errors included, name the file one way), else ``path``; links not resolved."""
    for here in (working_directory(), Path.cwd()):
        try:
            return path.relative_to(here)
        except ValueError:
            continue
    return path


def find_project(start: Path | None = None) -> Project:
    """The nearest project file in ``start`` (default: the working directory) or above it."""
    directory = Path(os.path.abspath(start if start is not None else working_directory()))
    for candidate_dir in (directory, *directory.parents):
        for extension in PROJECT_FILE_EXTENSIONS:
            candidate = candidate_dir / f"Pulumi{extension}"
            try:
                if candidate.is_file():
                    return load_project(candidate)
            except PermissionError:  # pulumi too treats an unreadable directory as no project
                continue
    raise _refuse(
        directory,
        f"no Pulumi.yaml here or in any directory above: run fleetctl inside the {PROJECT_NAME} project, "
        "or name the file with --stack-file PATH",
    )


def load_project(path: Path) -> Project:
    try:
        document = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError, ValueError) as error:
        raise _refuse(path, f"cannot read the project file: {' '.join(str(error).split())}") from None
    if not isinstance(document, Mapping):
        raise _refuse(path, "is not a Pulumi project file (not a mapping)")
    name = document.get("name")
    if name != PROJECT_NAME:
        raise _refuse(
            path,
            f"is the project {name!r}, not {PROJECT_NAME!r}: run fleetctl inside an {PROJECT_NAME} checkout, "
            "or name the file with --stack-file PATH",
        )
    config_dir = document.get("stackConfigDir")
    legacy = document.get("config")
    if config_dir is None and isinstance(legacy, str):
        config_dir = legacy  # Pulumi's older name for stackConfigDir
    if config_dir is not None and not isinstance(config_dir, str):
        raise _refuse(path, f"stackConfigDir must be a string, got {type(config_dir).__name__}")
    # Go's filepath.Join: a leading "/" of stackConfigDir does not make it absolute.
    stack_config_dir = Path(os.path.normpath(os.path.join(path.parent, (config_dir or "").lstrip("/"))))
    backend = document.get("backend")
    url = backend.get("url") if isinstance(backend, Mapping) else None
    return Project(path, name, stack_config_dir, url if isinstance(url, str) and url else None)


def stack_part(reference: str, project: Project) -> str:
    """The stack of ``stack``, ``org/stack`` or ``org/project/stack`` (the project must be ours)."""
    parts = reference.split("/")
    if len(parts) > 3 or any(not part for part in parts):
        raise _refuse(
            project.file,
            f"cannot read the stack name {reference!r}: give NAME, ORG/NAME or ORG/PROJECT/NAME",
        )
    if len(parts) == 3 and parts[1] != project.name:
        raise _refuse(
            project.file,
            f"the stack {reference!r} belongs to project {parts[1]!r}, but this is {project.name!r}",
        )
    name = parts[-1]
    if STACK_NAME.fullmatch(name) is None:
        raise _refuse(
            project.file,
            f"{name!r} is not a stack name: letters, digits, '_', '.' and '-' only, at most 100 characters",
        )
    return name


def pulumi_home() -> Path:
    """``PULUMI_HOME``, else ``.pulumi`` in the user's home directory (pulumihome.Dir)."""
    home = os.environ.get("PULUMI_HOME")
    if home:
        return Path(home)
    try:
        user_home = pwd.getpwuid(os.getuid()).pw_dir  # Go's user.Current(), not $HOME
    except KeyError:
        user_home = str(Path.home())
    return Path(user_home) / ".pulumi"


def workspace_file(project: Project) -> Path:
    digest = hashlib.sha1(str(project.file).encode(), usedforsecurity=False).hexdigest()
    return pulumi_home() / "workspaces" / f"{project.name}-{digest}-workspace.json"


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _refuse(path, f"cannot read Pulumi's file: {' '.join(str(error).split())}") from None


def _current_backend(project: Project) -> str | None:
    url = os.environ.get("PULUMI_BACKEND_URL") or project.backend_url
    if url:
        return url
    try:
        credentials = _json_file(pulumi_home() / "credentials.json")
    except StackFileError:
        return None  # unreadable (encrypted, say): the backend stays unknown
    current = credentials.get("current") if isinstance(credentials, Mapping) else None
    return current if isinstance(current, str) and current else None


def selected_stack(project: Project) -> tuple[str, str] | None:
    """(reference, where it came from) of the stack pulumi would use without ``--stack``, or None."""
    if "PULUMI_STACK" in os.environ:
        value = os.environ["PULUMI_STACK"]
        return (value, "PULUMI_STACK") if value else None
    path = workspace_file(project)
    settings = _json_file(path)
    if settings is None:
        return None
    if not isinstance(settings, Mapping):
        raise _refuse(path, "is not a Pulumi workspace file (not a JSON object)")
    by_backend = settings.get("stacks")
    legacy = settings.get("stack")
    chosen: Any = None
    if isinstance(by_backend, Mapping) and by_backend:
        backend = _current_backend(project)
        if backend is not None and backend in by_backend:
            chosen = by_backend[backend]
        elif backend is None and len(by_backend) == 1:
            chosen = next(iter(by_backend.values()))
        elif backend is None:
            raise _refuse(
                path,
                f"selects a stack for each of {len(by_backend)} backends ({', '.join(sorted(by_backend))}) and the "
                "current backend is unknown: pass --stack NAME or set PULUMI_BACKEND_URL",
            )
        else:
            chosen = legacy  # pulumi falls back to the older single selection
    else:
        chosen = legacy
    if not isinstance(chosen, str) or not chosen:
        return None
    return chosen, str(path)


def resolve_stack(reference: str | None, start: Path | None = None) -> ResolvedStack:
    """The stack file of ``reference`` (``--stack``), or of the stack pulumi has selected, in the
    project found from ``start`` (default: the working directory); refuses rather than guess."""
    project = find_project(start)
    if reference is not None:
        chosen_by = "--stack"
    else:
        selected = selected_stack(project)
        if selected is None:
            known = project.stacks()
            raise _refuse(
                project.file,
                "no stack given and none selected for this project: pass --stack NAME"
                + (f" (stacks here: {', '.join(known)})" if known else "")
                + ", or --stack-file PATH, or select one with `pulumi stack select NAME` or PULUMI_STACK",
            )
        reference, chosen_by = selected
    name = stack_part(reference, project)
    path = project.stack_file(name)
    if not path.is_file():
        known = project.stacks()
        raise _refuse(
            path,
            f"no stack file for stack {name!r} ({chosen_by})"
            + (f"; stacks here: {', '.join(known)}" if known else f"; {project.stack_config_dir} has none"),
        )
    return ResolvedStack(name, path, project, chosen_by)
