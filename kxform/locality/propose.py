"""The swizzle pass's default proposer asks the model: glue, on-disk cache, remark text.

`judge(source, kernel, hw, two_d)` returns the model's `Verdict` (the order to propose,
or None with the model's reason), or (None, why) when the model cannot judge the
kernel: the pass then leaves it alone and says why, since a remap nobody measured or
predicted can make a kernel slower. Without a harness spec the model judges a drafted
one (sizing.drafted_spec); it always judges at a timing size of its own
(sizing.timing_size), never at the small check sizes. Rankings are cached on disk by
the content of everything they depend on (source, spec, kernel, size, hardware
profile, candidates, model version), so a second run over the same file costs a file
read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from kxform.cache import cache_root, content_key, located, portable
from kxform.engine.proposal import Proposal, Provenance
from kxform.errors import KxformError
from kxform.fileio import write_atomic
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import SourceModel
from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec
from kxform.harness.request import UnitFlags
from kxform.hw import HwProfile
from kxform.locality.predict import Ranking, against_row, candidate_configs, rank_orders
from kxform.locality.sizing import drafted_spec, timing_size
from kxform.locality.trace import ModelRefused
from kxform.remap import RemapConfig, get_pattern

MODEL_VERSION = "locality-4"


@dataclass(frozen=True)
class Verdict:
    """The model's answer for one kernel: an order to propose (or None) and the remark text."""

    config: RemapConfig | None
    rationale: str
    ranking: dict[str, object]

    @property
    def provenance(self) -> Provenance:
        """What a proposal made on this verdict's word records: a prediction of this model."""
        return Provenance(model=f"kxform.locality {MODEL_VERSION}", evidence="predicted")

    def rank_candidates(self, proposals: list[Proposal]) -> list[Proposal]:
        """`proposals` (remaps) best first by the model's rank, each marked as predicted and
        carrying its figures; orders the model did not rank keep their place after them."""
        ranked: dict[tuple[object, ...], dict[str, object]] = {}
        for order in self.ranking["orders"]:  # type: ignore[attr-defined]
            if order["order"] != "row":
                config = _config_of(str(order["order"]))
                ranked[(config.pattern.name, *config.values)] = order
        known, unknown = [], []
        for proposal in proposals:
            order = ranked.get(proposal.values[0][1:] + proposal.values[1:])
            if order is None:
                unknown.append(proposal)
                continue
            why = (
                f"candidate ranked {order['rank']} by the model: {_figures(order)}, "
                f"{against_row(float(order['margin_to_identity']), 'predicted memory time')} than row-major"
            )  # type: ignore[arg-type]
            known.append((int(order["rank"]), replace(proposal, rationale=why, provenance=self.provenance)))  # type: ignore[call-overload]
        return [p for _, p in sorted(known, key=lambda item: item[0])] + unknown


def judge(
    source: SourceText,
    kernel: str,
    hw: HwProfile,
    two_d: bool,
    model: SourceModel | None = None,
    flags: UnitFlags | None = None,
) -> tuple[Verdict | None, str]:
    """The model's verdict on `kernel` of `source`, or (None, why it was not asked or
    could not judge). `model`: the source's parse (for drafting a spec without one);
    `flags`: the unit's include directories and defines (the project's build flags)."""
    if not any(_changes_order(c) for c in candidate_configs(hw, 2 if two_d else 1)):
        return None, "no candidate order differs from row-major here"
    spec, spec_path, why = _spec_for(source.path, kernel)
    try:
        if spec is None or spec_path is None:
            if why:
                return None, why
            spec, spec_path = drafted_spec(source, kernel, model or parse_model(source), flags)
        data = cached_ranking(source, spec, spec_path, hw, 2 if two_d else 1, flags)
    except ModelRefused as exc:
        return None, f"the locality model cannot judge it: {exc.cause}"
    except KxformError as exc:
        return None, f"the locality model failed: {exc.cause}"
    chosen = data.get("chosen")
    config = None
    if isinstance(chosen, str):
        config = _config_of(chosen)
    return Verdict(config, rationale(data), data), ""


def _changes_order(config: RemapConfig) -> bool:
    """False for remaps that are row-major by construction (xcd over one XCD)."""
    return not (config.pattern.name == "xcd" and int(config.params.get("xcds", 0)) == 1)


def _spec_for(path: str, kernel: str) -> tuple[KernelSpec | None, Path | None, str]:
    from kxform.harness.spec import find_spec_for, load_spec

    """The user's spec of `kernel`; (None, None, "") when there is none (draft one), or
    (None, None, why) when the model cannot judge without one."""
    if not path or not os.path.isfile(path):
        return None, None, "no harness spec, and none can be drafted (the source is not a file)"
    try:
        found = find_spec_for(path)
        spec = load_spec(found).find(kernel) if found is not None else None
    except KxformError as exc:
        return None, None, f"harness spec unusable: {exc}"
    if spec is None or found is None:
        return None, None, ""
    return spec, found, ""


def cached_ranking(
    source: SourceText, spec: KernelSpec, spec_path: Path, hw: HwProfile, dims: int, flags: UnitFlags | None = None
) -> dict[str, object]:
    """`rank_orders(...).to_json()` at the model's timing size (sizing.timing_size), from
    the cache when the same question was answered before; refusals are cached too."""
    size = timing_size(spec, hw)
    configs = candidate_configs(hw, dims)
    spec_text = spec_path.read_text(encoding="utf-8")
    key = content_key(
        MODEL_VERSION,
        source.text,
        spec_text,
        spec.name,
        repr(sorted(size.values.items())),
        json.dumps(hw.to_dict(), sort_keys=True, default=str),
        *[c.label() for c in configs],
        *(() if flags is None else (repr((flags.include_dirs, flags.defines)),)),
    )
    path = cache_root() / "locality" / f"{key}.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if "refused" in data:
            raise ModelRefused(located(str(data["refused"]), source.path))
        return dict(data)
    try:
        ranking: Ranking = rank_orders(source, spec, hw, size, configs, flags=flags)
        data = ranking.to_json()
    except ModelRefused as exc:
        _write(path, {"refused": portable(exc.cause, source.path)})
        raise
    _write(path, data)
    return data


def _write(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=1).encode("utf-8"))


def _config_of(label: str) -> RemapConfig:
    name, _, inner = label.partition("(")
    params = dict(item.split("=", 1) for item in inner.rstrip(")").split(",") if item) if inner else {}
    return get_pattern(name).resolve(params)


def rationale(data: dict[str, object]) -> str:
    """The remark text: 'predicted by the model' with the figures of the chosen order
    (or of the best one, when nothing is proposed) next to row-major's."""
    orders = {str(o["order"]): o for o in data["orders"]}  # type: ignore[union-attr]
    row = orders["row"]
    chosen = data.get("chosen")
    head = f"predicted by the model ({data['hw']}, size {data['size']}, {data['occupancy']})"
    if not isinstance(chosen, str):
        return f"{head}: {data['decision']}; row-major: {_figures(row)}"
    pick = orders[chosen]
    return (
        f"{head}: {chosen} {_figures(pick)} vs row-major {_figures(row)}; "
        f"{against_row(float(pick['margin_to_identity']), 'predicted memory time')} than row-major "  # type: ignore[arg-type]
        f"({pick['predicted_ms']} vs {row['predicted_ms']} ms; compute is not modelled, so a compute-bound kernel "
        f"gains less); sampling error of DRAM reads +-{_rel(pick):.1%}"
    )


def _figures(order: dict[str, object]) -> str:
    return (
        f"L2 hit {float(order['l2_hit_rate']):.0%}, DRAM read {float(order['dram_read_bytes']) / 1e9:.3g} GB, "  # type: ignore[arg-type]
        f"write {float(order['dram_write_bytes']) / 1e9:.3g} GB"
    )  # type: ignore[arg-type]


def _rel(order: dict[str, object]) -> float:
    value = float(order["dram_read_bytes"])  # type: ignore[arg-type]
    return float(order["dram_read_bytes_se"]) / value if value else 0.0  # type: ignore[arg-type]
