"""A drafted spec compares as the computation asks: exactly for data movement and integer
outputs, within 2 ulps for float arithmetic (kxform.harness.computes), and a pass that
reorders sums works with the draft unedited (its bound is measured, docs/trust.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.computes import what_it_computes
from kxform.harness.infer import infer_spec
from kxform.harness.spec import load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import rewrite


@pytest.mark.parametrize(
    "body, moves",
    [
        ("{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) out[i] = in[i]; }", True),
        ("{ int x = threadIdx.x; out[x * ldo + y] = in[y * ldi + x]; }", True),
        ("{ const float* src = table + ids[i] * dim; for (int d = 0; d < dim; d++) out[i * dim + d] = src[d]; }", True),
        ("{ float v = in[i]; out[i] = v; }", True),
        ("{ out[i] = (float)in[i]; }", True),
        ("{ out[i] = 0.0f; }", True),
        ("{ *(out + i) = *(in + i); }", True),
        ("{ y[i] = a * x[i] + y[i]; }", False),
        ("{ float s = 0; for (int j = 0; j < n; j++) s += x[j]; out[r] = s; }", False),
        ("{ y[i] += x[i]; }", False),
        ("{ *out = *x * 2; }", False),
        ("{ float v = x[i] * 2.0f; out[i] = v; }", False),
        ("{ float v = x[i]; v = v * v; out[i] = v; }", False),
        ("{ float v = x[i]; v++; out[i] = v; }", False),
    ],
)
def test_a_store_moves_data_only_when_its_value_is_a_loaded_element(body: str, moves: bool) -> None:
    assert what_it_computes(body, 1).moves is moves


def _draft(tmp_path: Path, source: Path, kernel: str, cpu) -> Path:  # type: ignore[no-untyped-def]
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes())
    draft = infer_spec(SourceText(str(path), path.read_bytes()), kernel, cpu)
    spec = tmp_path / f"{path.stem}.kxspec.toml"
    spec.write_text(draft.text)
    return spec


@pytest.mark.slow
@pytest.mark.parametrize(
    "family, kernel, line",
    [
        ("transpose", "transpose_naive", 'compare = { mode = "exact" }  # review: data movement'),
        ("embedding", "embedding_naive", 'compare = { mode = "ulp", ulps = 2 }  # review: arithmetic on floats'),
        ("matvec", "matvec_naive", 'compare = { mode = "ulp", ulps = 2 }  # review: arithmetic on floats (from line'),
    ],
)
def test_the_draft_states_the_comparison_the_computation_needs(tmp_path: Path, cpu, family, kernel, line) -> None:  # type: ignore[no-untyped-def]
    spec = _draft(tmp_path, CORPORA / "naive" / family / "naive.cu", kernel, cpu)
    assert line in spec.read_text()


@pytest.mark.slow
def test_a_reordering_rewrite_verifies_with_the_draft_unedited_and_a_lost_term_does_not(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    """The matrix-vector product's rows at 32 lanes: its outputs cancel (uniform [-1, 1]
    terms), so the relative bound applied per output rejected it under the draft; the
    measured absolute bound admits it, and still rejects a lane loop that loses a term."""
    spec_path = _draft(tmp_path, CORPORA / "naive" / "matvec" / "naive.cu", "matvec_naive", cpu)
    spec = load_spec(spec_path).kernel("matvec_naive")
    path = tmp_path / "naive.cu"
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, "rows{lanes=32,rows=4}", path=str(path))
    policy = result.results[0].policy
    good = verify_pair(original, validate_bytes(str(path), result.new_data), spec, cpu, policy=policy)
    assert good.ok, [s.summary() for s in good.sizes]
    lost = result.new_data.replace(b"j < N; j +=", b"j < N - 1; j +=", 1)
    assert lost != result.new_data
    bad = verify_pair(original, validate_bytes(str(path), lost), spec, cpu, policy=policy)
    assert not bad.ok and all(s.status == "mismatch" for s in bad.sizes), [s.summary() for s in bad.sizes]
