"""The tuning database: every evaluation kxform ever made, in SQLite.

One row per (kernel content hash, hardware, kxform version, configuration), with the
kernel's name and parameter names (to find similar kernels), the time and spread or
the failure class, and the cost. Rows are only ever inserted (`INSERT OR IGNORE`): a
configuration evaluated once is never evaluated again for the same key, which is
what makes `kxform tune --resume` continue a killed run without repeating work.

Concurrency: the file is opened in WAL mode with a busy timeout, every write is one
short transaction, so several `kxform tune` processes can share it. A file that is
not a kxform tuning database, or is corrupt, is an InputError naming it (one line),
and is never written to.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform import __version__
from kxform.cache import cache_root
from kxform.engine.params import ParamValue
from kxform.errors import InputError
from kxform.search.objective import CUT_OFF, Evaluation, Failure

SCHEMA = 1
APPLICATION_ID = 0x6B78746E  # "kxtn": marks the file as a kxform tuning database
BUSY_TIMEOUT_S = 60.0

_CREATE = """
CREATE TABLE IF NOT EXISTS evaluations (
    kernel_hash TEXT NOT NULL,
    hardware TEXT NOT NULL,
    version TEXT NOT NULL,
    config TEXT NOT NULL,
    kernel TEXT NOT NULL,
    param_names TEXT NOT NULL,
    objective TEXT NOT NULL,
    time_ms REAL,
    spread_ms REAL NOT NULL,
    failure TEXT,
    cost_s REAL NOT NULL,
    detail TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (kernel_hash, hardware, version, config)
);
CREATE INDEX IF NOT EXISTS by_kernel ON evaluations (kernel, param_names);
"""
_CREATE_FEATURES = """
CREATE TABLE IF NOT EXISTS kernel_features (
    kernel_hash TEXT PRIMARY KEY,
    kernel TEXT NOT NULL,
    param_names TEXT NOT NULL,
    features TEXT NOT NULL,
    created TEXT NOT NULL
)
"""
"""What each tuned kernel is like (kxform.search.transfer): a table added to databases
written before it on their next use."""


def default_path() -> Path:
    return cache_root() / "tuning.sqlite"


@dataclass(frozen=True)
class TuneKey:
    """What an evaluation belongs to."""

    kernel_hash: str
    kernel: str
    hardware: str
    param_names: tuple[str, ...]
    version: str = __version__
    objective: str = "time"


def config_text(config: Mapping[str, ParamValue]) -> str:
    """The canonical text of a configuration (sorted JSON), the row key."""
    return json.dumps(dict(sorted(config.items())), separators=(",", ":"))


@dataclass(frozen=True)
class StoredEvaluation:
    key: TuneKey
    config: dict[str, ParamValue]
    evaluation: Evaluation


class TuningDB:
    """A connection to the database file (created on first use)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{self.path}: cannot create its directory ({exc.strerror})") from None
        with self._errors():
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._check_and_create()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """sqlite errors become one-line InputErrors naming the file."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: not a usable kxform tuning database ({exc})") from None

    def _check_and_create(self) -> None:
        db = self._db
        app = db.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and app != APPLICATION_ID:
            raise InputError(f"{self.path}: an SQLite file, but not a kxform tuning database")
        if app == APPLICATION_ID:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA:
                raise InputError(f"{self.path}: tuning database schema {version}, this kxform reads {SCHEMA}")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise InputError(f"{self.path}: corrupt tuning database ({check})")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        if app == APPLICATION_ID:
            db.execute(_CREATE_FEATURES)
        if app != APPLICATION_ID:
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                    for statement in [*_CREATE.split(";"), _CREATE_FEATURES]:
                        if statement.strip():
                            db.execute(statement)
                    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version={SCHEMA}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TuningDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def put(self, key: TuneKey, config: Mapping[str, ParamValue], evaluation: Evaluation) -> bool:
        """Store one evaluation; False when that configuration was already stored."""
        row = (
            key.kernel_hash,
            key.hardware,
            key.version,
            config_text(config),
            key.kernel,
            ",".join(key.param_names),
            key.objective,
            evaluation.time_ms,
            evaluation.spread_ms,
            evaluation.failure.value if evaluation.failure else CUT_OFF if evaluation.cut_off else None,
            evaluation.cost_s,
            evaluation.detail,
            dt.datetime.now(dt.timezone.utc).isoformat(),
        )
        with self._errors():
            cursor = self._db.execute("INSERT OR IGNORE INTO evaluations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
        return cursor.rowcount == 1

    def put_features(self, key: TuneKey, features: Mapping[str, float]) -> None:
        """Store what the kernel of `key` is like (replacing what was stored for it)."""
        row = (
            key.kernel_hash,
            key.kernel,
            ",".join(key.param_names),
            json.dumps(dict(sorted(features.items()))),
            dt.datetime.now(dt.timezone.utc).isoformat(),
        )
        with self._errors():
            self._db.execute("INSERT OR REPLACE INTO kernel_features VALUES (?,?,?,?,?)", row)

    # ------------------------------------------------------------------ reading

    def kernels(self) -> list[tuple[str, str, tuple[str, ...], dict[str, float]]]:
        """Every kernel whose features are stored: (content hash, name, parameter names, features)."""
        with self._errors():
            rows = self._db.execute(
                "SELECT kernel_hash, kernel, param_names, features FROM kernel_features ORDER BY created"
            ).fetchall()
        out = []
        for kernel_hash, kernel, names, text in rows:
            try:
                features = json.loads(text)
                if not isinstance(features, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in features.values()
                ):
                    raise ValueError("the features are not an object of numbers")
            except ValueError as exc:
                raise InputError(f"{self.path}: malformed features of kernel {kernel!r:.60}: {exc}") from None
            out.append((kernel_hash, kernel, tuple(filter(None, names.split(","))), features))
        return out

    def of_kernel(self, kernel_hash: str) -> list[StoredEvaluation]:
        """Every evaluation of one kernel (content hash), on any hardware and version."""
        return self._select("kernel_hash = ?", (kernel_hash,))

    def get(self, key: TuneKey, config: Mapping[str, ParamValue]) -> Evaluation | None:
        with self._errors():
            row = self._db.execute(
                "SELECT time_ms, spread_ms, failure, cost_s, detail FROM evaluations "
                "WHERE kernel_hash = ? AND hardware = ? AND version = ? AND config = ?",
                (key.kernel_hash, key.hardware, key.version, config_text(config)),
            ).fetchone()
        try:
            return None if row is None else _evaluation(row)
        except (ValueError, TypeError) as exc:
            raise InputError(
                f"{self.path}: a malformed row of kernel {key.kernel!r:.60} (configuration "
                f"{config_text(config)!r:.80}): {exc}; not a row kxform wrote"
            ) from None

    def all(self, key: TuneKey) -> list[StoredEvaluation]:
        """Every evaluation of exactly this kernel, hardware and version, oldest first."""
        return self._select(
            "kernel_hash = ? AND hardware = ? AND version = ?", (key.kernel_hash, key.hardware, key.version)
        )

    def related(self, key: TuneKey) -> dict[str, list[StoredEvaluation]]:
        """Evaluations usable as a prior: the same kernel (content hash) on other
        hardware, and kernels of the same name and parameters (earlier versions of the
        source), grouped by source label; the key's own rows are left out."""
        rows = self._select(
            "(kernel_hash = ? OR (kernel = ? AND param_names = ?)) AND NOT "
            "(kernel_hash = ? AND hardware = ? AND version = ?)",
            (key.kernel_hash, key.kernel, ",".join(key.param_names), key.kernel_hash, key.hardware, key.version),
        )
        groups: dict[str, list[StoredEvaluation]] = {}
        for stored in rows:
            label = f"{stored.key.kernel}@{stored.key.hardware} ({stored.key.kernel_hash[:8]}, {stored.key.version})"
            groups.setdefault(label, []).append(stored)
        return groups

    def _select(self, where: str, args: tuple[Any, ...]) -> list[StoredEvaluation]:
        with self._errors():
            rows = self._db.execute(
                "SELECT kernel_hash, kernel, hardware, param_names, version, objective, config, time_ms, spread_ms, "
                f"failure, cost_s, detail FROM evaluations WHERE {where} ORDER BY created, rowid",
                args,
            ).fetchall()
        out = []
        for row in rows:
            try:
                key = TuneKey(row[0], row[1], row[2], tuple(filter(None, row[3].split(","))), row[4], row[5])
                out.append(StoredEvaluation(key, _config(row[6]), _evaluation(row[7:])))
            except (ValueError, TypeError, AttributeError) as exc:
                raise InputError(
                    f"{self.path}: a malformed row of kernel {str(row[1])!r:.60} (configuration "
                    f"{str(row[6])!r:.80}): {exc}; not a row kxform wrote"
                ) from None
        return out


def _config(text: Any) -> dict[str, ParamValue]:
    """A stored configuration: a JSON object of names to integers, strings or booleans."""
    config = json.loads(text)  # a JSONDecodeError is a ValueError
    if not isinstance(config, dict) or not all(
        isinstance(v, (int, str, bool)) and not isinstance(v, float) for v in config.values()
    ):
        raise ValueError("the configuration is not an object of integers, strings and booleans")
    return config


def _evaluation(row: tuple[Any, ...]) -> Evaluation:
    """A stored evaluation; the `failure` column holds the status of one that has a time
    and is not plainly ok (`cut_off`: timed on its first launches only)."""
    time_ms, spread, failure, cost, detail = row
    for name, value in (("time_ms", time_ms), ("spread_ms", spread), ("cost_s", cost)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{name} is {value!r:.40}, not a number")
    if failure == CUT_OFF:
        return Evaluation(time_ms, spread, None, cost, str(detail), cut_off=True)
    return Evaluation(time_ms, spread, Failure(failure) if failure else None, cost, str(detail))
