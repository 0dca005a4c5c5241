"""Private-row scratch left by killed runs, and the SIGTERM handler that ends a run cleanly.

A run's scratch (``<run>/scratch``: the packed codes of the private rows; ``<run>/checkpoints``:
GUM's checkpoints) is removed when the run ends, but a ``kill -9`` (or a lost machine) leaves it.
Each CLI run step marks its run folder with ``.owner`` (host and process id) while it runs; at the
start of any run step in a local runs dir, the scratch of every run folder whose owner is gone
(no marker, or a process of this host that no longer runs) is deleted, with the temporaries of
atomic writes it cut short (``.<name>.<32 hex>.tmp``, empty or partial:
:func:`privsyn_spark.runtime.storage.is_temporary`). A folder owned by a live process, or by another
host, is left alone (logged), and so is, in any folder, a checkpoint folder whose name
(``<host>-<pid>-<random>``) says a live process or another host may still use it (a ``sample`` of the
run). On a remote runs dir (a URI) nothing is swept.

SIGTERM (what Airflow and Kubernetes send before killing a task) and SIGINT (Ctrl-C) raise
:class:`StopSignal` in the main thread, a ``BaseException`` as KeyboardInterrupt is, so no ``except
Exception`` on the way (ours, py4j's, pyspark's) takes it for a failure it may handle and carry on; the
run's ``finally`` blocks delete its scratch as on any failure; the CLI then ends with :class:`Terminated`:
it deletes what is left of this run's local scratch and exits with 128 +
the signal's number (143 for SIGTERM, :data:`EXIT_TERMINATED`; 130 for SIGINT), the shell's convention
for a process ended by that signal. A SparkContext replaces the SIGINT handler when it starts (its
own raises KeyboardInterrupt): the CLI installs the handlers again once its session is up.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

from privsyn_spark.errors import PrivsynError
from privsyn_spark.runtime.storage import is_temporary

log = logging.getLogger(__name__)

EXIT_TERMINATED = 128 + signal.SIGTERM
SCRATCH_FOLDERS = ("scratch", "checkpoints")
OWNER_FILE = ".owner"


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Terminated(PrivsynError):
    """The process received SIGTERM or SIGINT; the run stopped and its scratch was removed."""

    exit_code = EXIT_TERMINATED

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}: the run stopped and its scratch was "
                         f"removed; rerun the same command to resume (persisted measurements are reused)")
        self.exit_code = 128 + signum


class StopSignal(BaseException):
    """Raised in the main thread by a stop signal; the CLI ends the run with its :attr:`error`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.error = Terminated(signum)


_received: list[int] = []


def terminated() -> Terminated | None:
    """The error to end with if a stop signal arrived (an exception raised inside a Spark call may have replaced it)."""
    return Terminated(_received[0]) if _received else None


def _raise_stop(signum: int, frame: Any) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
    _received.append(signum)
    logging.disable(logging.CRITICAL)  # py4j logs the interrupted call with a trace; the CLI's one line says why
    raise StopSignal(signum)


def install_stop_handlers() -> None:
    """Make SIGTERM and SIGINT raise :class:`StopSignal` in the main thread (no-op elsewhere; a signal that
    already arrived keeps its default action, so a second one still ends the process at once)."""
    try:
        for signum in STOP_SIGNALS:
            if signum not in _received:
                signal.signal(signum, _raise_stop)
    except ValueError:  # not the main thread
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(run_dir: Path) -> tuple[str, int] | None:
    try:
        host, pid = (run_dir / OWNER_FILE).read_text().split()
        return host, int(pid)
    except (OSError, ValueError):
        return None


def _in_use(folder: Path) -> bool:
    """Whether a process's own checkpoint folder (``<host>-<pid>-<random>``:
    :func:`privsyn_spark.runtime.scratch.own_folder`) may still be in use: another live process of this
    host, or any process of another host."""
    try:
        host, pid, _ = folder.name.rsplit("-", 2)
        return host != socket.gethostname() or (int(pid) != os.getpid() and _alive(int(pid)))
    except ValueError:
        return False


def remove_scratch(run_dir: Path) -> bool:
    """Delete a local run folder's scratch folders (but the checkpoint folders of processes that may still
    use them: two samples of one run at once); True if there was any."""
    found = False
    for name in SCRATCH_FOLDERS:
        folder = run_dir / name
        if not folder.exists():
            continue
        found = True
        kept = [p for p in folder.iterdir() if _in_use(p)] if name == "checkpoints" else []
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        for item in folder.iterdir():
            if item in kept:
                continue
            if item.is_dir():
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.unlink(missing_ok=True)
        log.info("run folder %s: checkpoints of a running process left alone (%s)", run_dir,
                 ", ".join(p.name for p in kept))
    return found


def orphaned_writes(run_dir: Path) -> list[Path]:
    """The temporaries of atomic writes under a local run folder (its scratch folders not searched)."""
    found = []
    for folder, subfolders, files in os.walk(run_dir):
        if Path(folder) == run_dir:
            subfolders[:] = [d for d in subfolders if d not in SCRATCH_FOLDERS]
        found += [Path(folder) / name for name in files if is_temporary(name)]
    return found


def sweep_and_claim(runs_dir: str, run_id: str) -> Path | None:
    """Delete stale scratch and cut-short writes in a local ``runs_dir``, then mark ``<runs_dir>/<run_id>``
    as this process's. Returns the marked run folder (None for a remote runs dir)."""
    if "://" in runs_dir:
        return None
    root = Path(runs_dir).expanduser()
    host, me = socket.gethostname(), os.getpid()
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        scratch = any((run_dir / name).exists() for name in SCRATCH_FOLDERS)
        orphans = orphaned_writes(run_dir)
        if not scratch and not orphans:
            continue
        owner = _owner(run_dir)
        if owner is not None and owner[1] != me and (owner[0] != host or _alive(owner[1])):
            log.info("run folder %s: scratch of a running process (%s, pid %d) left alone", run_dir, *owner)
            continue
        if scratch:
            remove_scratch(run_dir)
            log.warning("run folder %s: removed the scratch (private-row codes) a killed run left behind", run_dir)
        for orphan in orphans:
            orphan.unlink(missing_ok=True)
            log.warning("run folder %s: removed %s, a write a killed run cut short", run_dir, orphan.name)
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / OWNER_FILE).write_text(f"{host} {me}\n")
    return run_dir


STOP_REMOVE_TRIES = 10
"""After a stop signal the scratch is removed until none is left, at most this many times (0.2 s apart)."""


def release(run_dir: Path | None, terminated: bool = False) -> None:
    """At the end of a run step: drop the owner mark (and, after SIGTERM, any local scratch left)."""
    if run_dir is None:
        return
    if terminated:  # Spark's tasks may still be writing into it: until none is left (a few tries)
        for _ in range(STOP_REMOVE_TRIES):
            if not remove_scratch(run_dir):
                break
            time.sleep(0.2)
    try:
        (run_dir / OWNER_FILE).unlink()
    except FileNotFoundError:
        pass
