"""Proposers: who suggests which instance of a pass to try on a kernel.

`heuristic` (the default) applies the pass's documented rule; `lock` replays recorded
decisions; `claude` asks a language model through the anthropic SDK (the optional `llm`
extra). All return the engine's `Proposal` and every proposal is checked the same way.
This package must import without the optional extra: the SDK is loaded only by the
`claude` proposer, when it is chosen.
"""
