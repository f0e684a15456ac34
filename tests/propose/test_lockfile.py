"""`kxform apply --lock`: kxform.lock records decisions on corpus kernels, replays them byte
for byte without the proposer, and `--check --lock` catches every disagreement.
Timings of replay against deciding: tools/bench_lock.py."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from conftest import CORPORA, kxform_exe, logged_remarks, run_cli
from kxform.locality.propose import MODEL_VERSION
from kxform.propose.lock import Decision, load_decisions
from kxform.propose.lockfile import digest, read_lock, render, update_lock

KERNELS = ("sgemm_tiled", "transpose", "chained_scan", "stencil5", "black_scholes")
"""Applied by the model's prediction, left alone by it, refused (spin-wait), and two more."""
NO_CLAUDE = {"ANTHROPIC_API_KEY": "", "KXFORM_LLM_REPLAY": ""}
"""`--proposer claude` with these fails the moment it is needed: nothing to ask it with."""


def _corpus(root: Path, names: tuple[str, ...] = KERNELS) -> Path:
    for name in names:
        shutil.copytree(CORPORA / name, root / name)
    return root


def _sources(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.cu"))}


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _apply(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("apply", "--pass", "swizzle", "--verify", "static", *args, cwd=root, env=env)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes], list[dict]]:
    """A first `apply --lock` over corpus copies: the originals, the rewritten tree (with
    kxform.lock), its output and its log."""
    base = tmp_path_factory.mktemp("lock")
    originals = _corpus(base / "originals")
    first = base / "first"
    shutil.copytree(originals, first)
    done = _apply(first, "--lock", "--log", "run.jsonl", ".")
    assert done.returncode == 0, done.stderr
    assert "lock kxform.lock: 0 replayed, 5 decided; written" in done.stderr, done.stderr
    return originals, first, _sources(first), _records(first / "run.jsonl")


def test_the_first_run_records_every_kernel(recorded: tuple[Path, Path, dict[str, bytes], list[dict]]) -> None:
    originals, first, _, log = recorded
    decisions = {d.kernel: d for d in read_lock(first / "kxform.lock")}
    assert set(decisions) == {"sgemm_tiled", "transposeNoBankConflicts", "chained_scan", "jacobi5", "BlackScholesGPU"}
    sgemm = decisions["sgemm_tiled"]
    assert (sgemm.file, sgemm.pass_name, sgemm.outcome) == ("sgemm_tiled/sgemm_tiled.cu", "swizzle", "applied")
    assert dict(sgemm.params) == {"pattern": "grouped", "along": "y", "group": 8}
    assert (sgemm.proposer, sgemm.evidence, sgemm.model) == (
        "heuristic",
        "predicted",
        f"kxform.locality {MODEL_VERSION}",
    )
    assert "L2 hit" in sgemm.rationale and "DRAM read" in sgemm.rationale  # the predicted traffic it rests on
    assert (sgemm.hw, sgemm.kxform) == ("h100-sxm", __import__("kxform").__version__)
    text = (originals / "sgemm_tiled" / "sgemm_tiled.cu").read_bytes()
    start = text.index(b"__global__ void sgemm_tiled")
    end = text.index(b"\n}\n", start) + 2
    assert sgemm.source == digest(text[start:end])  # the kernel's own text, nothing else of the file
    assert sgemm.result and sgemm.result != sgemm.source
    scan = decisions["chained_scan"]
    assert scan.outcome == "left-alone" and scan.reason.startswith("SpinWait:") and not scan.params
    assert decisions["transposeNoBankConflicts"].reason.startswith("NoPredictedGain: predicted by the model")
    kernels = [r for r in log if r["type"] == "kernel"]
    assert {k["proposal"]["proposer"] for k in kernels if k["proposal"]} == {"heuristic"}
    lock_record = next(r for r in log if r["type"] == "lock")
    assert lock_record["decided"] == 5 and lock_record["written"] is True


@pytest.mark.slow
def test_a_replay_reproduces_the_run_byte_for_byte_without_the_proposer(
    recorded: tuple[Path, Path, dict[str, bytes], list[dict]], tmp_path: Path
) -> None:
    """Fresh originals plus the lock, with `--proposer claude` and no key: the proposer
    would fail if it were asked; nothing asks it, and the output is the first run's."""
    originals, first, output, _ = recorded
    second = tmp_path / "second"
    shutil.copytree(originals, second)
    shutil.copy(first / "kxform.lock", second / "kxform.lock")
    done = _apply(second, "--proposer", "claude", "--lock", "--log", "run.jsonl", ".", env=NO_CLAUDE)
    assert done.returncode == 0, done.stderr
    assert _sources(second) == output  # byte for byte
    assert (second / "kxform.lock").read_bytes() == (first / "kxform.lock").read_bytes()
    log = _records(second / "run.jsonl")
    proposers = [k["proposal"]["provenance"]["proposer"] for k in log if k["type"] == "kernel" and k["proposal"]]
    assert proposers == ["lock"] and not [r for r in log if r["type"].startswith("llm")]
    applied = next(k for k in log if k["type"] == "kernel" and k["proposal"])
    assert applied["proposal"]["rationale"].startswith("replayed from kxform.lock: recorded decision (heuristic")
    lock_record = next(r for r in log if r["type"] == "lock")
    assert (lock_record["replayed"], lock_record["decided"], lock_record["written"]) == (5, 0, False)
    assert "'transposeNoBankConflicts': left alone, as kxform.lock" in logged_remarks(done, second)
    assert any(
        "'transposeNoBankConflicts': left alone, as kxform.lock records (heuristic)" in r["message"]
        for r in log
        if r["type"] == "remark"
    )  # the whole remark in the log
    # planted: one kernel more, not in the lock -- now claude is needed, and says so before writing anything
    shutil.copytree(CORPORA / "softmax", second / "softmax")
    before = _sources(second)
    needs = _apply(second, "--proposer", "claude", "--lock", ".", env=NO_CLAUDE)
    assert needs.returncode == 2 and "needs ANTHROPIC_API_KEY" in needs.stderr
    assert _sources(second) == before and (second / "kxform.lock").read_bytes() == (first / "kxform.lock").read_bytes()


@pytest.mark.slow
def test_check_lock_passes_on_the_reproduced_tree_and_catches_a_hand_edit(
    recorded: tuple[Path, Path, dict[str, bytes], list[dict]], tmp_path: Path
) -> None:
    originals, first, _, _ = recorded
    tree = tmp_path / "tree"
    shutil.copytree(first, tree)
    lock = (tree / "kxform.lock").read_bytes()
    ok = _apply(tree, "--check", "--lock", ".")
    assert ok.returncode == 0, ok.stderr
    assert "4 replayed, 1 already as locked; not written (--check)" in ok.stderr
    gemm = tree / "sgemm_tiled" / "sgemm_tiled.cu"
    text = gemm.read_text()
    gemm.write_text(text.replace("float acc = 0.0f;", "float acc = 0.0f;  // tuned by hand"))  # planted
    before = _sources(tree)
    edited = _apply(tree, "--check", "--lock", ".")
    assert edited.returncode == 1, edited.stderr
    line = text[: text.index("__global__ void sgemm_tiled")].count("\n") + 1  # the kernel's line in the rewrite
    assert (
        f"sgemm_tiled/sgemm_tiled.cu:{line}: 'sgemm_tiled' (swizzle) changed since it was locked in kxform.lock"
        in edited.stderr
    )
    assert _sources(tree) == before and (tree / "kxform.lock").read_bytes() == lock  # --check writes nothing
    # the originals with the lock: the locked rewrite is not what the tree has
    pristine = tmp_path / "pristine"
    shutil.copytree(originals, pristine)
    shutil.copy(first / "kxform.lock", pristine)
    stale = _apply(pristine, "--check", "--lock", ".")
    assert stale.returncode == 1 and "1 file would be rewritten" in stale.stderr
    # a kernel nobody locked
    shutil.copytree(CORPORA / "softmax", tree / "softmax")
    gemm.write_text(text)
    new = _apply(tree, "--check", "--lock", ".")
    assert new.returncode == 1 and "softmax/softmax.cu:23: 'softmax_rows' (swizzle) is not in kxform.lock" in new.stderr


@pytest.mark.slow
def test_a_changed_kernel_is_reported_not_redecided(
    recorded: tuple[Path, Path, dict[str, bytes], list[dict]], tmp_path: Path
) -> None:
    originals, first, output, _ = recorded
    tree = tmp_path / "tree"
    shutil.copytree(originals, tree)
    shutil.copy(first / "kxform.lock", tree)
    lock = (tree / "kxform.lock").read_bytes()
    gemm = tree / "sgemm_tiled" / "sgemm_tiled.cu"
    edited = gemm.read_text().replace("float acc = 0.0f;", "float acc = 0.0f;  // tuned by hand")
    gemm.write_text(edited + "\n// a note after the kernel\n")
    stencil = tree / "stencil5" / "stencil5.cu"
    stencil.write_text(stencil.read_text() + "\n// an edit outside the kernel\n")
    done = _apply(tree, "--lock", "--log", "run.jsonl", ".")
    assert done.returncode == 0, done.stderr
    assert gemm.read_text() == edited + "\n// a note after the kernel\n"  # left as it is, not re-decided
    lines = [line for line in done.stderr.splitlines() if "changed since it was locked" in line]
    assert len(lines) == 2  # the remark and one line
    assert "remark: swizzle not applied to 'sgemm_tiled': changed since it was locked in kxform.lock" in lines[0]
    assert (
        lines[1].startswith("kxform: sgemm_tiled/sgemm_tiled.cu:29: 'sgemm_tiled' (swizzle) changed since")
        and "kxform apply --lock --relock --kernel sgemm_tiled" in lines[1]
    )
    assert (tree / "kxform.lock").read_bytes() == lock
    assert "4 replayed, 1 changed since locked; unchanged" in done.stderr
    # re-decided on request: the new text gets its own entry, and the rewrite
    again = _apply(tree, "--lock", "--relock", "--kernel", "sgemm_tiled", ".")
    assert again.returncode == 0 and "0 replayed, 1 decided; written" in again.stderr, again.stderr
    assert "kxform_block" in gemm.read_text()
    entry = next(d for d in read_lock(tree / "kxform.lock") if d.kernel == "sgemm_tiled")
    old = next(d for d in read_lock(first / "kxform.lock") if d.kernel == "sgemm_tiled")
    assert entry.outcome == "applied" and entry.source != old.source and entry.params == old.params
    assert _apply(tree, "--check", "--lock", ".").returncode == 0


@pytest.mark.parametrize(
    "content, words",
    [
        ("version = 1\n[[decision]\nkernel = 'k'\n", "kxform.lock:2:"),  # corrupt TOML: file and line
        ("version = 2\n", "written by a newer kxform: format version 2"),
        (
            'version = 1\n[[decision]]\nkernel = "k"\npass = "swizzle"\nkxform = "99.0"\n',
            "kxform.lock:5:1: decision #1: written by kxform 99.0, newer than this kxform",
        ),
        (
            'version = 1\n[[decision]]\nkernel = "k"\npass = "swizzle"\nparams = 3\n',
            "kxform.lock:5:1: decision #1: `params` must be a table",
        ),
        (
            'version = 1\n\n[[decision]]\nkernel = "k"\npass = "swizzle"\n\n[[decision]]\nkernel = "k"\npass = "swizzle"\n'
            'source = "abc"\n',
            "kxform.lock:10:1: decision #2: `source` must be a digest",
        ),
        ('version = 1\n[[decision]]\nkernel = "k"\npass = "swizzle"\noutcome = "maybe"\n', "`outcome` must be one of"),
        ('version = 1\n[[decision]]\nkernel = "k"\npass = "swizzle"\ntimestamp = 1\n', "unknown key 'timestamp'"),
        ("version = 1\ndecision = 3\n", "`decision` must be a list of tables"),
        (
            'version = 1\n[[decision]]\nkernel = "k"\npass = "swizzle"\n[[decision]]\nkernel = "k"\npass = "swizzle"\n',
            "a second entry for <any file>: k (swizzle)",
        ),
    ],
)
def test_a_bad_lock_is_a_one_line_error_and_nothing_is_written(tmp_path: Path, content: str, words: str) -> None:
    tree = _corpus(tmp_path, ("sgemm_tiled",))
    (tree / "kxform.lock").write_text(content)
    before = _sources(tree)
    for mode in ([], ["--check"]):
        done = _apply(tree, *mode, "--lock", ".")
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "kxform.lock" in done.stderr
    assert _sources(tree) == before and (tree / "kxform.lock").read_text() == content
    assert not (tree / ".kxform").exists()  # not even a log


@pytest.mark.slow
def test_concurrent_runs_leave_one_valid_lock_with_both_entries(tmp_path: Path) -> None:
    tree = _corpus(tmp_path, ("sgemm_tiled", "chained_scan"))
    procs = [
        subprocess.Popen(
            [kxform_exe(), "apply", "--pass", "swizzle", "--verify", "static", "-q", "--lock=kxform.lock", name],
            cwd=tree,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("sgemm_tiled", "chained_scan")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert {d.kernel for d in read_lock(tree / "kxform.lock")} == {"sgemm_tiled", "chained_scan"}


def _add_entry(args: tuple[str, int]) -> bool:
    path, i = args
    return update_lock(
        Path(path), {(f"f{i}.cu", "k", "swizzle"): Decision("k", "swizzle", (("group", i),), file=f"f{i}.cu")}
    )


def test_the_file_lock_keeps_every_writer(tmp_path: Path) -> None:
    """Eight processes read, merge and write the same lockfile at once: none is lost."""
    lock = tmp_path / "kxform.lock"
    with ProcessPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(_add_entry, [(str(lock), i) for i in range(16)]))
    assert sorted(d.file for d in read_lock(lock)) == sorted(f"f{i}.cu" for i in range(16))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".kxform-tmp")]


@pytest.mark.slow
def test_a_killed_run_never_leaves_a_half_written_lock(tmp_path: Path) -> None:
    tree = _corpus(tmp_path, ("sgemm_tiled", "transpose", "chained_scan"))
    previous = render([Decision("old", "swizzle", (("group", 4),), file="x.cu")])
    for delay in (0.5, 1.0, 1.5, 2.0, 3.0):
        (tree / "kxform.lock").write_bytes(previous)
        proc = subprocess.Popen(
            [kxform_exe(), "apply", "--pass", "swizzle", "--verify", "static", "-q", "--lock", "."],
            cwd=tree,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = (tree / "kxform.lock").read_bytes()
        decisions = read_lock(tree / "kxform.lock")  # whole: the old lock or the new one, never a mix
        assert data == previous or len(decisions) == 4, data
        for path in (tree / "sgemm_tiled").glob("*.cu"):  # the sources are written after the lock
            if b"kxform_block" in path.read_bytes():
                assert len(decisions) == 4


def test_the_lockfile_is_sorted_stable_and_round_trips(tmp_path: Path) -> None:
    formula = "per = 4 * gx\nfirst = (pid / per) * 4\nlx = (pid % per) / 4\nly = first + (pid % per) % 4"
    decisions = [
        Decision(
            "k2",
            "swizzle",
            (("pattern", "custom"),),
            file="b.cu",
            payload=formula,
            proposer="claude",
            model="m",
            evidence="measured",
            cost_usd=0.05,
            tokens=1200,
            source=digest(b"x"),
            result=digest(b"y"),
            hw="h100-sxm",
            kxform="0.1.0",
            figures=(("original_ms", 1.5), ("rewritten_ms", 1.2)),
        ),
        Decision("k1", "tile", (("TILE", 32),), file="b.cu", source=digest(b"z"), rationale='a "quoted" why'),
        Decision("k1", "swizzle", (), file="a.cu", outcome="left-alone", reason="SpinWait: spins", source=digest(b"w")),
    ]
    data = render(decisions)
    assert render(list(reversed(decisions))) == data  # the order of the run does not matter
    text = data.decode()
    assert [line for line in text.splitlines() if line.startswith("file = ")] == [
        'file = "a.cu"',
        'file = "b.cu"',
        'file = "b.cu"',
    ]
    assert 'pass = "tile"' in text.split('kernel = "k1"')[2] and 'payload = """' in text  # readable in diffs
    path = tmp_path / "kxform.lock"
    path.write_bytes(data)
    assert render(load_decisions(str(path))) == data and set(load_decisions(str(path))) == set(decisions)


def test_proposer_lock_reads_kxform_lock_and_writes_nothing(
    recorded: tuple[Path, Path, dict[str, bytes], list[dict]], tmp_path: Path
) -> None:
    originals, first, output, _ = recorded
    tree = tmp_path / "tree"
    shutil.copytree(originals, tree)
    shutil.copytree(CORPORA / "softmax", tree / "softmax")
    shutil.copy(first / "kxform.lock", tree)
    done = _apply(tree, "--proposer", "lock", ".")
    assert done.returncode == 0, done.stderr
    assert {k: v for k, v in _sources(tree).items() if not k.startswith("softmax")} == output
    assert "not applied to 'softmax_rows': no recorded decision in the lock record" in done.stderr
    assert (tree / "kxform.lock").read_bytes() == (first / "kxform.lock").read_bytes()


def test_a_kernel_gone_from_its_file_is_reported_then_dropped(
    recorded: tuple[Path, Path, dict[str, bytes], list[dict]], tmp_path: Path
) -> None:
    originals, first, _, _ = recorded
    tree = tmp_path / "tree"
    shutil.copytree(originals, tree)
    shutil.copy(first / "kxform.lock", tree)
    scan = tree / "chained_scan" / "chained_scan.cu"
    scan.write_text(scan.read_text().replace("chained_scan(", "renamed_scan("))
    check = _apply(tree, "--check", "--lock=kxform.lock", "chained_scan")
    assert (
        check.returncode == 1
        and "'chained_scan' (swizzle) of chained_scan/chained_scan.cu is locked but no longer in the file"
        in check.stderr
    ), check.stderr
    diff = _apply(tree, "--diff", "--lock=kxform.lock", "chained_scan")
    assert (
        "not written (--diff)" in diff.stderr
        and (tree / "kxform.lock").read_bytes() == (first / "kxform.lock").read_bytes()
    )
    done = _apply(tree, "--lock=kxform.lock", "chained_scan")
    assert done.returncode == 0 and "1 decided, 1 locked but gone; written" in done.stderr, done.stderr
    assert {d.kernel for d in read_lock(tree / "kxform.lock")} >= {"renamed_scan", "sgemm_tiled"}
    assert "chained_scan" not in {d.kernel for d in read_lock(tree / "kxform.lock")}


@pytest.mark.slow
def test_the_lock_goes_in_the_depfile_and_the_pre_commit_hook(tmp_path: Path) -> None:
    clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is not installed (test extra)")
    hooks = {h["id"]: h for h in clientlib.load_manifest(str(Path(__file__).parents[2] / ".pre-commit-hooks.yaml"))}
    tree = _corpus(tmp_path, ("sgemm_tiled",))
    (tree / "pyproject.toml").write_text('[tool.kxform]\npasses = ["swizzle"]\nverify = "static"\n')
    hook = hooks["kxform-check-lock"]
    argv = hook["entry"].split()[1:] + list(hook["args"]) + ["sgemm_tiled/sgemm_tiled.cu"]
    unlocked = run_cli(*argv, cwd=tree)
    assert unlocked.returncode == 1 and "is not in kxform.lock" in unlocked.stderr, unlocked.stderr
    done = run_cli("apply", "--lock", "-o", "out", "--depfile", "out/gemm.d", "sgemm_tiled/sgemm_tiled.cu", cwd=tree)
    assert done.returncode == 0, done.stderr
    assert str(tree / "kxform.lock") in (tree / "out" / "gemm.d").read_text()
    assert "kxform_block" in (tree / "out" / "sgemm_tiled" / "sgemm_tiled.cu").read_text()
    assert run_cli(*argv, cwd=tree).returncode == 1  # the tree itself still has the original
    assert run_cli("apply", "--lock", "sgemm_tiled", cwd=tree).returncode == 0
    assert run_cli(*argv, cwd=tree).returncode == 0
