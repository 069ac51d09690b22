"""Independent, seeded runs (trainings) side by side, one per CPU core, with the numbers a plain
loop gives.

The notebooks train several tiny models (one per seed, per head count, per positional scheme).
Each trains fastest on one thread, so on a machine with two cores a loop leaves one idle;
``run_all`` runs them in forked processes instead, and returns what each returns. The page
views record their states the same way (``widgets/page.py``'s ``build_scene``).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .checks import check_positive_int
from .device import cpu_threads

__all__ = ["run_all", "usable_cores"]

MAX_PROCESSES = 8  # the default's cap: each forked worker holds its own copy of what it touches

# What the forked workers read: inherited through fork, never pickled, so a job may be a lambda
# or a function defined in a notebook. Set by run_all for the life of its pool only.
_JOBS: Sequence[Callable[[], Any]] = ()
_STATE: tuple = ()
_THREADS: int | None = None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, which ``taskset`` and most
    container runtimes set), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _rng_state() -> tuple:
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _set_rng_state(state: tuple) -> None:
    random.setstate(state[0])
    np.random.set_state(state[1])
    torch.set_rng_state(state[2])


def _call(job: Callable[[], Any], state: tuple, num_threads: int | None) -> Any:
    _set_rng_state(state)  # every job starts from the same random state, in either mode
    with cpu_threads(num_threads):
        return job()


def _worker(index: int) -> bytes:
    """In a forked worker: run job ``index`` and send its result back as ``torch.save`` bytes
    (tensors and modules included; no file descriptors shared with the parent)."""
    result = _call(_JOBS[index], _STATE, _THREADS)
    buffer = io.BytesIO()
    try:
        torch.save(result, buffer)
    except Exception as error:  # e.g. a lambda inside the result: it cannot leave the process
        raise ValueError(f"job {index}'s result must be picklable to come back from its worker "
                         f"process (run_all(..., processes=1) keeps it in this one), got "
                         f"{type(result).__name__}: {error}") from None
    return buffer.getvalue()


def _can_fork() -> bool:
    """Forked workers are safe: Linux (fork is the start method there, and macOS's system
    libraries are not fork-safe), no CUDA (a forked child cannot use a GPU its parent set up, and
    on a GPU the runs are not CPU-bound), and not already inside a worker (a daemon process)."""
    return (sys.platform.startswith("linux")
            and "fork" in multiprocessing.get_all_start_methods()
            and not torch.cuda.is_available()
            and not multiprocessing.current_process().daemon)


def run_all(jobs: Sequence[Callable[[], Any]] | Mapping[Any, Callable[[], Any]], *,
            processes: int | None = None, num_threads: int | None = 1) -> list | dict:
    """Call every job (a function of no arguments, e.g. a ``functools.partial``) and return
    their results in order: a list for a sequence of jobs, a dict with the same keys for a
    mapping.

    Every job starts from the random state of Python's, NumPy's and PyTorch's global generators
    at the call, runs on ``num_threads`` CPU threads (None: the count as it is), and the global
    generators are left as they were. So a job that seeds itself returns the same numbers (bit for
    bit) whether the jobs run one after another or side by side, in any order.

    Side by side: up to ``processes`` forked worker processes (default: one per usable core, at
    most ``MAX_PROCESSES`` and one per job); only the results come back (sent with
    ``torch.save``), not a job's other effects, so a job should return what it makes. One after
    another, in this process: with ``processes=1``, one job or one core, off Linux, on a machine
    with CUDA (the runs then use the GPU), or inside a worker already.
    """
    if isinstance(jobs, Mapping):
        keys, calls = list(jobs), list(jobs.values())
    elif isinstance(jobs, Sequence) and not isinstance(jobs, (str, bytes)):
        keys, calls = None, list(jobs)
    else:
        raise ValueError(f"jobs must be a list or a dict of functions of no arguments, got "
                         f"{type(jobs).__name__}")
    for key, job in zip(keys if keys is not None else range(len(calls)), calls):
        if not callable(job):
            raise ValueError(f"jobs[{key!r}] must be callable (a function of no arguments), got "
                             f"{type(job).__name__}")
    if processes is not None:
        processes = check_positive_int("processes", processes)
    if num_threads is not None:
        num_threads = check_positive_int("num_threads", num_threads)
    workers = min(len(calls), processes or min(usable_cores(), MAX_PROCESSES))

    state = _rng_state()
    try:
        if workers <= 1 or not _can_fork():
            results = [_call(job, state, num_threads) for job in calls]
        else:
            results = _forked(calls, state, num_threads, workers)
    finally:
        _set_rng_state(state)
    return dict(zip(keys, results)) if keys is not None else results


def _forked(calls: list[Callable[[], Any]], state: tuple, num_threads: int | None,
            workers: int) -> list:
    global _JOBS, _STATE, _THREADS
    _JOBS, _STATE, _THREADS = calls, state, num_threads
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            blobs = pool.map(_worker, range(len(calls)), chunksize=1)
    finally:
        _JOBS, _STATE, _THREADS = (), (), None
    return [torch.load(io.BytesIO(blob), weights_only=False) for blob in blobs]
