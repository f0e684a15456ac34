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
import sys
from collections.abc import Sequence

from kxform import __version__
from kxform import exitcodes
from kxform.errors import KxformError

SUBCOMMANDS: tuple[str, ...] = ("apply", "inspect", "passes", "verify", "harness", "hw", "log", "report", "tune")
"""Modules of kxform.cli that define subcommands, in help order."""

class _CMakeDir(argparse.Action):
    """`kxform --cmake-dir`: where kxformConfig.cmake is installed (package data)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from pathlib import Path

        print(Path(__file__).resolve().parent.parent / "cmake")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kxform",
        description="Checked, verified source-to-source rewrites of CUDA/HIP kernels.",
    )
    parser.add_argument("--version", action="version", version=f"kxform {__version__}")
    parser.add_argument("--cmake-dir", action=_CMakeDir, nargs=0,
                        help="print the directory of kxform's CMake package (for -Dkxform_DIR=...) and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"kxform.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"kxform.cli.{name}":
                continue  # subcommand not part of this build
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return exitcodes.USAGE
    try:
        return int(args.func(args))
    except KxformError as exc:
        print(f"kxform: error: {exc}", file=sys.stderr)
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
