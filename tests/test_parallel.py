"""run_all: the same numbers side by side (forked) as in a loop, every job from the same random
state and on its thread count, the caller's generators and threads left alone, and bad input
refused."""

from __future__ import annotations

import functools
import os
import random

import numpy as np
import pytest
import torch

from helpers import DecoderLM, parallel, relative_task, set_seed, toy
from helpers.parallel import run_all, usable_cores

FORKS = parallel._can_fork()  # False on a machine with CUDA, where run_all is a loop


def _weights_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def _relative(seed: int) -> DecoderLM:
    set_seed(seed)  # the initial weights, as notebook 10 does
    model = DecoderLM(10, 8, 2, 1, ffn_hiddens=8, max_len=16, positional="rope")
    relative_task.train(model, steps=6, batch_size=8, length=8, lr=1e-2, seed=seed)
    return model


def _draws() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(3)


def test_trained_models_equal_a_plain_loop_bit_for_bit():
    jobs = {(heads, seed): functools.partial(toy.train, heads, seed=seed, steps=8, every=4)
            for heads in (1, 2) for seed in (0, 1)}
    loop = {key: job() for key, job in jobs.items()}
    side_by_side = run_all(jobs, processes=2)
    assert list(side_by_side) == list(jobs)
    for key in jobs:
        assert _weights_equal(side_by_side[key].model, loop[key].model), key
        assert side_by_side[key].final_accuracy == loop[key].final_accuracy
    models = run_all([functools.partial(_relative, s) for s in (0, 1, 2)], processes=2)
    assert all(_weights_equal(m, _relative(s)) for s, m in zip((0, 1, 2), models))
    assert not _weights_equal(models[0], models[1])  # the seeds matter: not one run copied


@pytest.mark.parametrize("processes", [1, 2])
def test_every_job_starts_from_the_callers_random_state_which_is_left_alone(processes):
    set_seed(5)
    want = _draws()  # what the first draws after set_seed(5) give
    set_seed(5)
    got = run_all([_draws] * 3, processes=processes)
    for r, n, t in got:  # every job, whichever process ran it and after whichever other job
        assert (r, n) == want[:2] and torch.equal(t, want[2])
    after = _draws()  # the generators are where they were before the call
    assert after[:2] == want[:2] and torch.equal(after[2], want[2])


@pytest.mark.parametrize("processes", [1, 2])
def test_threads_per_job_and_the_callers_count_restored(processes):
    before = torch.get_num_threads()
    assert run_all([torch.get_num_threads] * 2, processes=processes) == [1, 1]
    assert run_all([torch.get_num_threads] * 2, processes=processes, num_threads=None) == [before] * 2
    assert torch.get_num_threads() == before


def test_side_by_side_means_other_processes_on_linux_without_cuda():
    pids = run_all([os.getpid] * 4, processes=2)
    if FORKS:
        assert os.getpid() not in pids and len(set(pids)) <= 2
    else:
        assert pids == [os.getpid()] * 4
    assert run_all([os.getpid] * 4, processes=1) == [os.getpid()] * 4
    assert run_all([os.getpid]) == [os.getpid()]  # one job: no process to start


@pytest.mark.skipif(not FORKS, reason="run_all is a loop here (CUDA, or not Linux)")
def test_inside_a_worker_it_is_a_loop():
    """A pool's workers are daemons, which may not start processes of their own."""
    def nested():
        return os.getpid(), run_all([os.getpid] * 2, processes=2)

    for worker, inner in run_all([nested, nested], processes=2):
        assert worker != os.getpid() and inner == [worker, worker]


def test_with_cuda_it_is_a_loop(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert run_all([os.getpid] * 3, processes=2) == [os.getpid()] * 3


def test_lambdas_and_closures_work_results_come_back_in_order():
    scale = 3.0
    jobs = [lambda i=i: torch.full((2,), i * scale) for i in range(5)]
    out = run_all(jobs, processes=2)
    assert all(torch.equal(t, torch.full((2,), i * scale)) for i, t in enumerate(out))
    assert run_all({"b": lambda: 2, "a": lambda: 1}, processes=2) == {"b": 2, "a": 1}
    assert list(run_all({"b": lambda: 2, "a": lambda: 1})) == ["b", "a"]
    assert run_all([]) == [] and run_all({}) == {}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_jobs_error_reaches_the_caller(processes):
    def fails():
        raise ValueError("lr must be positive, got -1")

    with pytest.raises(ValueError, match="lr must be positive"):
        run_all([lambda: 1, fails], processes=processes)
    assert torch.get_num_threads() >= 1


@pytest.mark.skipif(not FORKS, reason="run_all is a loop here (CUDA, or not Linux)")
def test_a_result_that_cannot_leave_its_process_is_refused_clearly():
    with pytest.raises(ValueError, match=r"job 1's result must be picklable.*processes=1"):
        run_all([lambda: 1, lambda: (lambda: 2)], processes=2)
    assert run_all([lambda: 1, lambda: (lambda: 2)], processes=1)[1]() == 2  # a loop keeps it


@pytest.mark.parametrize("jobs, message", [
    ((job for job in [os.getpid]), r"jobs must be a list or a dict .* got generator"),
    ("os.getpid", r"jobs must be a list or a dict .* got str"),
    (os.getpid, r"jobs must be a list or a dict .* got builtin_function_or_method"),
    ([os.getpid, 3], r"jobs\[1\] must be callable .* got int"),
    ({"a": None}, r"jobs\['a'\] must be callable .* got NoneType"),
])
def test_bad_jobs_are_refused(jobs, message):
    with pytest.raises(ValueError, match=message):
        run_all(jobs)


@pytest.mark.parametrize("name", ["processes", "num_threads"])
@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "2"])
def test_bad_counts_are_refused(name, bad):
    with pytest.raises(ValueError, match=rf"{name} must be .*got"):
        run_all([os.getpid], **{name: bad})


def test_usable_cores_is_the_affinity_mask():
    assert usable_cores() == len(os.sched_getaffinity(0)) >= 1
