"""Entry point of the `kxform` command.

Each subcommand lives in its own module of this package and exposes
`register(subparsers) -> None` (adds its parser and sets `func=run`) and
`run(args) -> int` (the exit code). Exit codes follow black and ruff:
0 success, 1 changes needed (`--check`) or a check failed, 2 usage or input error,
123 internal error.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import warnings
from collections.abc import Sequence

from kxform import __version__
from kxform import exitcodes
from kxform.errors import Deprecated, KxformError, did_you_mean, printable

SUBCOMMANDS: tuple[str, ...] = (
    "optimize",
    "apply",
    "inspect",
    "passes",
    "verify",
    "harness",
    "hw",
    "log",
    "report",
    "tune",
    "deps",
)
"""Modules of kxform.cli that define subcommands, in help order."""


class _CMakeDir(argparse.Action):
    """`kxform --cmake-dir`: where kxformConfig.cmake is installed (package data)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from pathlib import Path

        print(Path(__file__).resolve().parent.parent / "cmake")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with "did you mean" on a mistyped subcommand or choice."""

    def error(self, message: str) -> None:  # type: ignore[override]
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if found:
            message += did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
        super().error(message)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of `parser` and of the subcommands below it."""
    out: list[str] = []
    for action in parser._actions:
        out += [o for o in action.option_strings if o.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _option_strings(sub)
    return out


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]  # type: ignore[no-any-return]
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """parse_args, naming the closest option of the subcommand for an unknown one."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub = _subparser(parser, getattr(args, "command", None))
        options = _option_strings(sub)
        hints = "".join(did_you_mean(e.split("=")[0], options) for e in extras[:1] if e.startswith("-"))
        sub.error(f"unrecognized arguments: {' '.join(extras)}{hints}")
    return args


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; `only`: with that one subcommand (a run of it imports no
    other subcommand's module: `kxform deps`, run on every build, starts faster)."""
    parser = _Parser(
        prog="kxform",
        description="Checked, verified source-to-source rewrites of CUDA/HIP kernels.",
    )
    parser.add_argument("--version", action="version", version=f"kxform {__version__}")
    parser.add_argument(
        "--cmake-dir",
        action=_CMakeDir,
        nargs=0,
        help="print the directory of kxform's CMake package (for -Dkxform_DIR=...) and exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS if only is None else (only,):
        try:
            module = importlib.import_module(f"kxform.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"kxform.cli.{name}":
                continue  # subcommand not part of this build
            raise
        module.register(subparsers)
    return parser


def _notes(message: Warning | str, category: type[Warning], *rest: object, **kw: object) -> None:
    """Deprecation notes as one line each, `kxform: note: ...`; other warnings as Python shows them."""
    if issubclass(category, Deprecated):
        print(printable(f"kxform: note: {message}"), file=sys.stderr)
    else:
        _python_showwarning(message, category, *rest, **kw)  # type: ignore[arg-type]


_python_showwarning = warnings.showwarning


def main(argv: Sequence[str] | None = None) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("default", Deprecated)  # once per message
        warnings.showwarning = _notes
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=given[0] if given and given[0] in SUBCOMMANDS else None)
    args = _parse(parser, given)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return exitcodes.USAGE
    try:
        return int(args.func(args))
    except KxformError as exc:
        print(printable(f"kxform: error: {exc}"), file=sys.stderr)
        return exitcodes.USAGE
    except KeyboardInterrupt:
        print("kxform: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        return exitcodes.OK
    except Exception as exc:  # a defect in kxform: one line, the traceback in a file, exit 123
        from kxform.orchestrate.runner import save_traceback

        saved = save_traceback(exc)
        cause = " ".join(str(exc).split())
        print(f"kxform: internal error: {type(exc).__name__}: {cause} (traceback saved to {saved})", file=sys.stderr)
        return exitcodes.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
