"""`kxform apply` options that choose the proposer (--proposer, --lock, --attempts, ...),
and the claude search that runs before the ordinary apply pipeline. What `--lock` does
with the lockfile is kxform.cli.lock_args."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import replace

from kxform.orchestrate.runner import ApplyConfig
from kxform.errors import KxformError, UsageError
from kxform.log.passlog import PassLog
from kxform.propose.registry import NAMES, ProposerSpec, canonical

DEFAULT_ATTEMPTS = 4


def register_proposer_args(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("proposers")
    group.add_argument(
        "--proposer",
        default="heuristic",
        metavar="NAME",
        help=f"who proposes: {', '.join(NAMES)} (default: heuristic, the documented rules; claude "
        "needs the llm extra and ANTHROPIC_API_KEY)",
    )
    group.add_argument(
        "--lock",
        nargs="?",
        const="",
        metavar="FILE",
        help="replay the decisions of the lockfile FILE (default: kxform.lock at the project root) and "
        "record new ones in it; with --check, exit 1 where the tree and the lock disagree; with "
        "--proposer lock, FILE may also be a JSON decision record (docs/lockfile.md)",
    )
    group.add_argument(
        "--relock",
        action="store_true",
        help="with --lock: decide the selected kernels (--kernel) anew and replace their entries",
    )
    group.add_argument("--no-lock", action="store_true", help="ignore the configuration's 'lock'")
    group.add_argument(
        "--attempts", type=int, metavar="N", help=f"claude: proposals tried per kernel (default {DEFAULT_ATTEMPTS})"
    )
    group.add_argument(
        "--patience",
        type=int,
        default=2,
        metavar="N",
        help="claude: stop after N attempts in a row that do not improve the best (default 2)",
    )
    group.add_argument(
        "--model", metavar="MODEL", help="claude: model (default: $KXFORM_LLM_MODEL or claude-sonnet-4-6)"
    )
    group.add_argument(
        "--record",
        metavar="FILE",
        help="claude: also write the decisions kept to FILE (replay them with --proposer lock --lock FILE)",
    )


def proposer_spec(args: argparse.Namespace, locked: bool = False) -> ProposerSpec:
    """The proposer the options ask for; usage errors before any work (and before any log).
    `locked`: the lockfile decides which kernels need a proposer at all, so claude's key is
    required later, and only when some kernel is not in the lock (kxform.cli.lock_args)."""
    name = canonical(args.proposer)
    claude_only = [
        flag
        for flag, value in (("--attempts", args.attempts), ("--model", args.model), ("--record", args.record))
        if value is not None
    ]
    if claude_only and name != "claude":
        raise UsageError(f"{claude_only[0]} goes with --proposer claude")
    if name == "claude":
        from kxform.propose.client import require_claude

        if args.attempts is not None and args.attempts < 1 or args.patience < 1:
            raise UsageError("--attempts and --patience must be at least 1")
        if not locked:
            require_claude()
    return ProposerSpec(name)  # `lock`: the decisions come with the lock plan (kxform.cli.lock_args)


def search_with_claude(
    args: argparse.Namespace, config: ApplyConfig, log: PassLog, only: Mapping[str, tuple[str, ...]] | None = None
) -> ApplyConfig:
    """Run the attempt loop over the paths (with `only`: over those files, each for the
    kernels named, the ones the lockfile does not cover); the returned config's proposer
    (`claude`) proposes what the loop kept, through the ordinary apply pipeline."""
    from kxform.propose.client import DEFAULT_MODEL, MODEL_ENV, ClaudeClient, ClientOptions
    from kxform.propose.search import search
    from kxform.propose.session import SessionOptions

    model = args.model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
    client = ClaudeClient(ClientOptions(model=model))
    options = SessionOptions(args.attempts or DEFAULT_ATTEMPTS, args.patience, config.measure)

    def record(data: dict[str, object]) -> None:
        log.write({"schema": 1, "run": log.run_id, **data})
        if data.get("type") == "llm_attempt" and not args.quiet:
            usage = data.get("usage") or {}
            cost = usage.get("cost_usd") if isinstance(usage, dict) else None
            money = "cost unknown" if cost is None else f"${cost:.4f}"
            print(
                f"{data['file']}: {data['kernel']}: attempt {data['attempt']}: {data['proposal']}: {data['status']}"
                f" ({data['stage']}): {str(data['reason'])[:160]} [{money}]",
                file=sys.stderr,
            )

    if only is None:
        result = search(args.paths, config, options, client, record)
    else:
        from kxform.propose.search import SearchResult

        sessions = [
            s
            for path, kernels in only.items()
            for s in search([path], replace(config, kernels=kernels), options, client, record).sessions
        ]
        result = SearchResult(tuple(sessions))
    failed = next((s for s in result.sessions if s.api_failure), None)
    if failed is not None:  # an environment failure: exit 2, nothing written or recorded
        raise ApiUnavailable(
            f"--proposer claude: the API failed on {failed.file}: {failed.kernel}: "
            f"{failed.api_failure}; nothing written, nothing recorded (run again)"
        )
    total = sum((s.usage for s in result.sessions), start=_zero())
    log.write(
        {
            "schema": 1,
            "run": log.run_id,
            "type": "llm_summary",
            "model": model,
            "kernels": len(result.sessions),
            "decisions": len(result.decisions),
            "usage": total.to_json(),
        }
    )
    if not args.quiet:
        print(
            f"kxform: claude ({model}): {len(result.decisions)} of {len(result.sessions)} kernel(s) with a verified "
            f"proposal; {total.describe()}",
            file=sys.stderr,
        )
    if args.record:
        from kxform.propose.lock import write_decisions

        write_decisions(args.record, result.decisions)
    spec = replace(
        config.proposer or ProposerSpec(),
        name="claude",
        decisions=result.decisions,
        record="claude session",
        missing="the claude session found no verified proposal",
    )
    return replace(config, proposer=spec)


class ApiUnavailable(KxformError):
    """The model's API could not be reached, timed out or failed on the server's side."""


def _zero():  # type: ignore[no-untyped-def]
    from kxform.propose.cost import Usage

    return Usage(cost_usd=0.0, cached=True)
