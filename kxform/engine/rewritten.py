"""The file a pass's edits leave: applied once, validated and parsed.

The driver applies a pass's edits for the proposals it accepted (`edited_file`), checks
the result (`Pass.check_result`) and hands it to `Pass.verify_policy`, so a pass reads
the rewritten launch from the file itself. A pre-edit check that needs the rewritten
text of one proposal (ptxas's registers of a candidate) asks for the same thing with that
proposal alone; the result is kept per (pass, proposals, source version) in the run's
analysis manager, so the driver reuses it when that proposal is the one applied, and no
pass applies its own edits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kxform.engine.edits import apply_edits
from kxform.errors import CheckFailed, InputError
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import SourceModel
from kxform.frontend.source import SourceText, validate_bytes

if TYPE_CHECKING:
    from kxform.engine.pass_api import Pass, PassContext, Proposal


@dataclass(frozen=True)
class Rewritten:
    """A pass's edits applied: the new text, its line map to the input, the parsed model."""

    source: SourceText
    line_map: tuple[int, ...]
    model: SourceModel


def edited_file(ctx: PassContext, pass_: Pass, proposals: Sequence[Proposal]) -> Rewritten:
    """The file as `pass_`'s edits for `proposals` leave it (computed once per run, pass,
    proposals and version of the input). Raises CheckFailed("size") where the result is no
    valid source file, EditConflict where the edits overlap."""
    key = (type(pass_).__name__, pass_.spec(), tuple((p.kernel, p.values, p.payload) for p in proposals))
    return ctx.analyses.memo("rewritten", key, ctx.model, lambda: _apply(ctx, pass_, proposals))


def _apply(ctx: PassContext, pass_: Pass, proposals: Sequence[Proposal]) -> Rewritten:
    source = ctx.model.source
    edited = apply_edits(source, pass_.edit(ctx, proposals))
    try:
        new_source = validate_bytes(source.path, edited.data, rewritten=True)
    except InputError as exc:
        raise CheckFailed("size", exc.cause) from None
    return Rewritten(new_source, tuple(edited.line_map), parse_model(new_source))
