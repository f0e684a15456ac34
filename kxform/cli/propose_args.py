"""`kxform apply` options that choose the proposer (--proposer, --lock, --attempts, ...),
and the claude search that runs before the ordinary apply pipeline."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from kxform.engine.runner import ApplyConfig
from kxform.errors import UsageError
from kxform.log.passlog import PassLog
from kxform.propose.registry import NAMES, ProposerSpec, canonical, lock_spec

DEFAULT_ATTEMPTS = 4


def register_proposer_args(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("proposers")
    group.add_argument("--proposer", default="heuristic", metavar="NAME",
                       help=f"who proposes: {', '.join(NAMES)} (default: heuristic, the documented rules; claude "
                       "needs the llm extra and ANTHROPIC_API_KEY)")
    group.add_argument("--lock", metavar="RECORD", help="decision record (JSON or TOML) replayed by --proposer lock")
    group.add_argument("--attempts", type=int, metavar="N",
                       help=f"claude: proposals tried per kernel (default {DEFAULT_ATTEMPTS})")
    group.add_argument("--patience", type=int, default=2, metavar="N",
                       help="claude: stop after N attempts in a row that do not improve the best (default 2)")
    group.add_argument("--model", metavar="MODEL", help="claude: model (default: $KXFORM_LLM_MODEL or "
                       "claude-sonnet-4-6)")
    group.add_argument("--record", metavar="FILE", help="claude: also write the decisions kept to FILE (replay them "
                       "with --proposer lock --lock FILE)")


def proposer_spec(args: argparse.Namespace) -> ProposerSpec:
    """The proposer the options ask for; usage errors before any work (and before any log)."""
    name = canonical(args.proposer)
    if args.lock and name != "lock":
        raise UsageError("--lock RECORD goes with --proposer lock")
    claude_only = [flag for flag, value in (("--attempts", args.attempts), ("--model", args.model),
                                            ("--record", args.record)) if value is not None]
    if claude_only and name != "claude":
        raise UsageError(f"{claude_only[0]} goes with --proposer claude")
    if name == "lock":
        if not args.lock:
            raise UsageError("--proposer lock needs --lock RECORD (a JSON or TOML decision record)")
        return lock_spec(args.lock)
    if name == "claude":
        from kxform.propose.client import require_claude

        if args.attempts is not None and args.attempts < 1 or args.patience < 1:
            raise UsageError("--attempts and --patience must be at least 1")
        require_claude()
    return ProposerSpec(name)


def search_with_claude(args: argparse.Namespace, config: ApplyConfig, log: PassLog) -> ApplyConfig:
    """Run the attempt loop over the paths; the returned config's proposer (`claude`)
    proposes what the loop kept, through the ordinary apply pipeline."""
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
            print(f"{data['file']}: {data['kernel']}: attempt {data['attempt']}: {data['proposal']}: {data['status']}"
                  f" ({data['stage']}): {str(data['reason'])[:160]} [{money}]", file=sys.stderr)

    result = search(args.paths, config, options, client, record)
    total = sum((s.usage for s in result.sessions), start=_zero())
    log.write({"schema": 1, "run": log.run_id, "type": "llm_summary", "model": model,
               "kernels": len(result.sessions), "decisions": len(result.decisions), "usage": total.to_json()})
    if not args.quiet:
        print(f"kxform: claude ({model}): {len(result.decisions)} of {len(result.sessions)} kernel(s) with a verified "
              f"proposal; {total.describe()}", file=sys.stderr)
    if args.record:
        from kxform.propose.lock import write_decisions

        write_decisions(args.record, result.decisions)
    spec = ProposerSpec("claude", result.decisions, "claude session", "the claude session found no verified proposal")
    return replace(config, proposer=spec)


def _zero():  # type: ignore[no-untyped-def]
    from kxform.propose.cost import Usage

    return Usage(cost_usd=0.0, cached=True)
