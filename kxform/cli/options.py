"""Options shared by subcommands: the project configuration (`--config`, `--no-config`)
and how a command-line value, a configured value and a default combine.

Not a subcommand (no `register`): the subcommands that read the configuration
(`apply`, `inspect`, `verify`) import it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import TypeVar

from kxform.errors import UsageError
from kxform.harness.request import UnitFlags
from kxform.log.remarks import RemarkFilter
from kxform.workspace.config import ProjectConfig, find_config, load_config

T = TypeVar("T")


def add_config_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--config",
        metavar="FILE",
        help="project configuration (default: the nearest kxform.toml or pyproject.toml with a "
        "[tool.kxform] table, walking up from PATH)",
    )
    group.add_argument("--no-config", action="store_true", help="ignore any project configuration")


def add_flag_options(parser: argparse.ArgumentParser) -> None:
    """The project's build flags: a compilation database, include directories, defines."""
    parser.add_argument(
        "-p",
        "--build-dir",
        dest="build_dir",
        metavar="BUILD_DIR",
        help="directory holding compile_commands.json (include paths and defines)",
    )
    parser.add_argument(
        "-I",
        dest="include",
        action="append",
        default=[],
        metavar="DIR",
        help="include directory (repeatable; before the configuration's)",
    )
    parser.add_argument(
        "-D",
        dest="define",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="preprocessor define (repeatable; before the configuration's)",
    )


def add_walk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-gitignore",
        dest="gitignore",
        action="store_false",
        help="also walk into what .gitignore (and .git/info/exclude) ignore",
    )


def add_remark_options(parser: argparse.ArgumentParser) -> None:
    """clang's remark filters (kxform.log.remarks.RemarkFilter): the log keeps every remark."""
    for flag, kind in (("-Rpass", "applied"), ("-Rpass-missed", "missed"), ("-Rpass-analysis", "analysis")):
        parser.add_argument(
            flag,
            dest=flag[2:].replace("-", "_"),
            metavar="REGEX",
            help=f"print only {kind} remarks, of passes whose name matches REGEX (with any "
            "-Rpass* flag, kinds not named are not printed)",
        )


def remark_filter(args: argparse.Namespace) -> RemarkFilter:
    """The filter `-Rpass*` asked for; a bad regex is a UsageError naming its flag."""
    compiled: dict[str, re.Pattern[str] | None] = {}
    for field, flag in (("passed", "pass"), ("missed", "pass_missed"), ("analysis", "pass_analysis")):
        text = getattr(args, flag, None)
        try:
            compiled[field] = re.compile(text) if text is not None else None
        except re.error as exc:
            raise UsageError(f"-R{flag.replace('_', '-')}={text}: not a regular expression ({exc})") from None
    return RemarkFilter(**compiled)


def project_config(args: argparse.Namespace, paths: Sequence[str]) -> ProjectConfig | None:
    """The configuration named by `--config`, else the one found from `paths`, else None."""
    if getattr(args, "no_config", False):
        return None
    explicit = getattr(args, "config", None)
    if explicit:
        return load_config(explicit)
    found = find_config(paths)
    return load_config(found) if found is not None else None


def pick(given: T | None, configured: T | None, default: T) -> T:
    """The command line wins over the configuration, which wins over the default."""
    if given is not None:
        return given
    if configured is not None:
        return configured
    return default


def unit_flags(args: argparse.Namespace, file: str) -> UnitFlags:
    """`file`'s build flags as `kxform apply` takes them: `-p BUILD_DIR`'s entry, then
    `-I`/`-D`, then the project configuration's `include`/`defines`."""
    import os

    from kxform.workspace.flags import merged_build_dir

    project = project_config(args, [file])
    include = tuple(os.path.abspath(d) for d in args.include) + (project.include if project else ())
    defines = tuple(args.define) + (project.defines if project else ())
    build_dir = args.build_dir or (project.build_dir if project else None)
    with merged_build_dir([file], include, defines, build_dir) as merged:
        return UnitFlags.from_build_dir(merged, file)
