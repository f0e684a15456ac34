"""The analyses behind launch contracts: where a launch's pointers come from (one
allocation, two, or unknown), and whether a rewritten grid still covers the original's
work for every size (proven by z3, or refuted with the sizes)."""

from __future__ import annotations

import pytest

from kxform.analysis.grid_cover import prove_cover
from kxform.analysis.provenance import relation
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import SourceModel
from kxform.frontend.source import SourceText

HOST = b"""
__global__ void k(float* y, const float* x, int n);
struct Pair { float* a; float* b; };
void launch(float* y, const float* x, int n) { k<<<1, 32>>>(y, x, n); }
void shifted(float* y, int n) { k<<<1, 32>>>(y, y - 1, n); }
void library(float* y, const float* x, int n) { k<<<1, 32>>>(y, x, n); }
void members(Pair p, int n) { k<<<1, 32>>>(p.a, p.b, n); }
int main()
{
    float *a = nullptr, *b;
    float* c;
    float host[64];
    cudaMalloc(&a, 400);
    cudaMalloc((void**)&b, 400);
    cudaMalloc(&c, 400);
    float* d = a + 4;
    launch(a, b, 10);
    launch(d, a, 10);
    k<<<1, 1>>>(c, (const float*)c + 1, 3);
    k<<<1, 1>>>(c, host, 3);
    k<<<1, 1>>>(a, b, 3);
}
"""


def _model() -> SourceModel:
    return parse_model(SourceText("host.cu", HOST))


def _relations(function: str) -> list[str]:
    model = _model()
    found = []
    for site in model.launches:
        if site.function == function:
            pair = relation(model, site.function, site.span.start, (site.args[0], site.args[1]), lambda name: [model])
            found.append(pair.relation)
    return found


@pytest.mark.parametrize(
    "function, expected",
    [
        ("launch", ["alias"]),  # called with (a, b) and with (a + 4, a): one context aliases
        ("shifted", ["alias"]),  # y and y - 1: offsets of one pointer, whoever calls it
        ("library", ["unknown"]),  # nobody in the run calls it
        ("members", ["unknown"]),  # members of a struct: not followed
        ("main", ["alias", "distinct", "distinct"]),  # c and c + 1; c and a host array; a and b
    ],
)
def test_launch_arguments_are_followed_to_their_allocations(function: str, expected: list[str]) -> None:
    assert _relations(function) == expected


def test_an_alias_names_the_allocation() -> None:
    model = _model()
    site = next(s for s in model.launches if s.function == "launch")
    pair = relation(model, site.function, site.span.start, (site.args[0], site.args[1]), lambda name: [model])
    assert pair.relation == "alias" and "host.cu:10" in pair.detail


CAPPED = "(std::min((n > 0 ? (n + (256) - 1) / (256) : 1), 65535))"


@pytest.mark.parametrize(
    "old, old_items, new, new_items, env, verdict, words",
    [
        ("(n + 255) >> 8", 256, "(n + 255) >> 8", 128, {}, "refuted", "n = 129"),
        ("(n + 255) / 256", 256, "(n + K_BLOCK_X - 1) / K_BLOCK_X", 128, {"K_BLOCK_X": 128}, "proven", ""),
        ("(n + 255) >> 8", 256, "(n + 255) >> 8", 512, {}, "proven", ""),  # a larger block covers more
        ("(N + 127) / 128", 128, "(N + K_ROWS - 1) / K_ROWS", 4, {"K_ROWS": 4}, "proven", ""),
        ("ceil((float)n / 256)", 256, "ceil((float)n / 128)", 128, {}, "proven", ""),
        ("(n - 1) / 256 + 1", 256, "(n - 1) / 256 + 1", 64, {}, "refuted", "of"),
        ("(M * N + 255) / 256", 256, "(M * N + 127) / 128", 128, {}, "proven", ""),
        ("n / 256", 256, "n / 256", 128, {}, "refuted", ""),  # a plain division covers its quotient's blocks
        ("64", 256, "64", 128, {}, "independent", "does not count"),  # a grid-stride launch: nothing to prove
        ("div_by_block(n)", 256, "div_by_block(n)", 128, {}, "independent", ""),
        ("grid_for(n, 256)", 256, "grid_for(n, 128)", 128, {}, "unknown", "cannot follow"),
        ("(n + 255) >> shift", 256, "(n + 255) >> shift", 128, {}, "unknown", ""),
        # a launcher's guard and cap (`std::min(n > 0 ? ... : 1, 65535)`): followed, or refuted
        (CAPPED, 256, "((" + CAPPED + ") + C - 1) / C", 512, {"C": 2}, "proven", ""),
        (CAPPED, 256, "((" + CAPPED + ") + C - 1) / C", 512, {"C": 4}, "refuted", "n = "),
        (CAPPED, 256, CAPPED.replace("65535", "16383"), 1024, {}, "refuted", "n = "),  # a cap that covers less
        ("n > 0 ? (n + 255) / 256 : 1", 256, "n > 0 ? (n + 255) / 256 : 1", 128, {}, "refuted", "n = "),
    ],
)
def test_a_rewritten_grid_is_proven_to_cover_the_original_or_refused(
    old: str, old_items: int, new: str, new_items: int, env: dict[str, int], verdict: str, words: str
) -> None:
    cover = prove_cover(old, old_items, new, new_items, new_env=env)
    assert cover.verdict == verdict, cover.detail
    assert words in cover.detail


ROWS = b"""#define K_ROWS 8
#define K_LANES 32
__global__ void k(float* y, const float* x, int n) { }
void run(float* y, const float* x, int n)
{
    k<<<(n + 127) / 128, 128>>>(y, x, n);
}
"""


@pytest.mark.parametrize(
    "launch, key",
    [
        (b"k<<<(n + K_ROWS - 1) / K_ROWS, K_ROWS * K_LANES>>>(y, x, n);", None),
        (
            b"k<<<(n + 127) / 128, K_ROWS * K_LANES>>>(y, x, n);",
            "GridNotFollowed",
        ),  # the grid kept: 8 of 128 rows per block
        (b"k<<<(n + K_ROWS - 1) / K_ROWS, 128>>>(y, x, n);", "BlockNotFollowed"),  # the block kept
    ],
)
def test_the_rewritten_launches_of_the_file_must_give_what_the_contract_says(launch: bytes, key: str | None) -> None:
    from kxform.engine.contracts import AxisItems, LaunchContract, check_contract
    from kxform.engine.edits import Edit, apply_edits
    from kxform.engine.run_files import RunFiles
    from kxform.errors import CheckFailed

    model = parse_model(SourceText("rows.cu", ROWS))
    old = b"k<<<(n + 127) / 128, 128>>>(y, x, n);"
    at = ROWS.index(old)
    rewritten = parse_model(
        SourceText("rows.cu", apply_edits(model.source, [Edit(at, at + len(old), launch.decode(), "test")]).data)
    )
    contract = LaunchContract("k", geometry=True, axes=(AxisItems(0, 128, 8),), block=(256,))
    if key is None:
        records = check_contract(model, contract, rewritten, RunFiles())
        assert any(name == "grid" and "proven" in detail for name, _, detail in records)
        return
    with pytest.raises(CheckFailed) as caught:
        check_contract(model, contract, rewritten, RunFiles())
    assert caught.value.key == key and "rows.cu:6" in caught.value.cause


def test_grid_proofs_on_many_threads_at_once_agree_with_one_thread() -> None:
    """`tune -j N` prepares candidates on threads, each may prove a grid: z3's shared
    default context crashed the process (exit -11) when two proofs ran at once."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [
        ("(n + 255) / 256", 256, "(n + 127) / 128", 128),
        ("(n + 255) >> 8", 256, "(n + 255) >> 8", 128),
        ("ceil_div(n, 256)", 256, "ceil_div(n, 64)", 64),
        ("n < 1024 ? (n + 31) / 32 : 32", 32, "(n + 63) / 64", 64),
    ] * 16
    alone = [prove_cover(*case).verdict for case in cases]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda case: prove_cover(*case).verdict, cases))
    assert together == alone
    assert {"proven", "refuted"} <= set(alone)
