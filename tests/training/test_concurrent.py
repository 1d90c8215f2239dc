"""Runs trained at the same time in child processes (training/concurrent.py, issue 14): the
choice of how many, the children's results, failures and deaths, and a concurrent reproduction
that equals one trained run after run, also when killed and resumed."""
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from runs import assert_children_die_with_their_parent, reproduce_args, run_cli, write_config

from agnostophobia.errors import ConfigError, TrainingDiverged
from agnostophobia.training import concurrent
from agnostophobia.training.concurrent import (Job, RunProcessFailed, check_concurrent_runs,
                                               resolve_concurrent_runs, run_jobs)
from agnostophobia.training.config import parse_experiment

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
LONG = 10 * concurrent.AUTO_MIN_IMAGES_PER_RUN


# ------------------------------------------------------------------------- how many at once
@pytest.mark.parametrize("cores, device, runs, images, expected", [
    (2, CPU, 4, LONG, 2),     # measured on this 2-core machine: two 1-thread runs beat one 2-thread run
    (1, CPU, 4, LONG, 1),     # one core: nothing to share
    (16, CPU, 4, LONG, 2),
    (2, CUDA, 8, LONG, concurrent.GPU_AUTO_RUNS),
    (2, CUDA, 3, LONG, 3),    # never more processes than runs
    (2, CPU, 4, concurrent.AUTO_MIN_IMAGES_PER_RUN - 1, 1),  # too short to pay for a process start
])
def test_auto_chooses_by_device_cores_and_run_length(monkeypatch, cores, device, runs, images, expected):
    monkeypatch.setattr(concurrent, "available_cores", lambda: cores)
    assert resolve_concurrent_runs("auto", device, runs, images) == expected


def test_a_number_is_taken_as_given_up_to_the_number_of_runs(monkeypatch):
    monkeypatch.setattr(concurrent, "available_cores", lambda: 2)
    assert resolve_concurrent_runs(3, CPU, 8, 10) == 3  # also for short runs: the user asked
    assert resolve_concurrent_runs(3, CPU, 2, LONG) == 2


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "two", "", None])
def test_bad_concurrent_runs_are_refused_by_key(value):
    with pytest.raises(ConfigError, match="concurrent_runs.*auto.*integer >= 1"):
        check_concurrent_runs(value)


def test_config_key_budget_override_and_its_errors():
    base = {"name": "x", "protocol": "lenet++", "budgets": {"fast": {"concurrent_runs": 3}}}
    experiment = parse_experiment(dict(base))
    assert experiment.concurrent_runs == "auto"
    assert experiment.for_budget("fast").concurrent_runs == 3
    with pytest.raises(ConfigError, match="'concurrent_runs'"):
        parse_experiment({**base, "concurrent_runs": 0})
    with pytest.raises(ConfigError, match="budgets.slow.concurrent_runs"):
        parse_experiment({**base, "budgets": {"slow": {"concurrent_runs": "many"}}})


def test_the_flag_refuses_a_bad_value_in_one_line(tiny_config, tmp_path):
    result = run_cli(["train", tiny_config, "--out", tmp_path / "run", "--concurrent-runs", "0"])
    assert result.returncode == 2
    assert "--concurrent-runs" in result.stderr and "integer >= 1" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- the children
def _threads_and_value(value):
    return torch.get_num_threads(), value


def _raise(error):
    raise error


def _kill_myself():
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep(seconds):
    time.sleep(seconds)
    return seconds


def _mark_then_raise(marker, error):
    Path(marker).touch()
    raise error


def _wait_for(marker, after):
    """Return ``after`` seconds once ``marker`` exists (at most 60 s): a job that outlasts
    another's failure on a loaded machine too, where a fixed sleep may end before the other
    process has even started."""
    deadline = time.monotonic() + 60
    while not Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    return after


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_every_job_runs_in_a_child_with_its_share_of_threads():
    started, done = [], {}
    jobs = [Job(f"job{i}", _threads_and_value, (i,)) for i in range(3)]
    # three processes of one thread: when one ends, the 3 threads shared by 2 are still 1 each
    run_jobs(jobs, processes=3, threads=1, on_start=lambda job: started.append(job.name),
             on_done=lambda job, result: done.__setitem__(job.name, result))
    assert sorted(started) == ["job0", "job1", "job2"]
    assert done == {"job0": (1, 0), "job1": (1, 1), "job2": (1, 2)}


def _threads_seen(seconds, started=None):
    """The thread counts this process had, polled for up to ``seconds`` until it has 2; touches the
    file ``started`` (if given) once its first count is read."""
    seen = [torch.get_num_threads()]
    if started:
        Path(started).touch()
    deadline = time.monotonic() + seconds
    while seen[-1] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        seen.append(torch.get_num_threads())
    return sorted(set(seen))


def _threads_once_started(started, seconds):
    """This process's thread count, once the file ``started`` exists (waits up to ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not Path(started).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return torch.get_num_threads(), 0


def test_the_last_run_gets_the_threads_of_those_that_ended(tmp_path):
    done = {}
    # "short" ends only once "long" has read its first thread count: on a loaded machine "long" could
    # otherwise start after "short" ended and get both threads at once (the next test's case)
    started = str(tmp_path / "long-started")
    jobs = [Job("short", _threads_once_started, (started, 60)), Job("long", _threads_seen, (60, started))]
    run_jobs(jobs, processes=2, threads=1, on_start=lambda job: None,
             on_done=lambda job, result: done.__setitem__(job.name, result))
    assert done["short"] == (1, 0)
    assert done["long"] == [1, 2]  # started with its share, raised to both threads once "short" ended


def test_a_run_started_when_the_others_have_ended_gets_every_thread():
    # the last run of a reproduction often starts after the one before it ended (a fine-tune waits
    # for its start network): it ran on one thread of two until it ended (osr-mnist, 5 min a split)
    done = {}
    run_jobs([Job("alone", _threads_seen, (20,))], processes=2, threads=1, on_start=lambda job: None,
             on_done=lambda job, result: done.__setitem__(job.name, result))
    assert done["alone"][-1] == 2


@pytest.mark.slow  # 7-10 s: with the slow tests, keeping make test under its 570 s
def test_threads_set_by_the_caller_are_kept_for_the_last_run():
    done = {}
    jobs = [Job("short", _threads_and_value, (0,)), Job("long", _threads_seen, (3,))]
    run_jobs(jobs, processes=2, threads=1, on_start=lambda job: None,
             on_done=lambda job, result: done.__setitem__(job.name, result), share_out=False)
    assert done["long"] == [1]


def test_a_failure_is_raised_as_itself_after_the_running_jobs_finish(tmp_path):
    done = []
    marker = tmp_path / "failed"
    jobs = [Job("slow", _wait_for, (str(marker), 1.0)),
            Job("bad", _mark_then_raise, (str(marker), TrainingDiverged("entropic diverged at epoch 3"))),
            Job("never", _sleep, (0.0,))]
    with pytest.raises(TrainingDiverged, match="entropic diverged at epoch 3"):
        run_jobs(jobs, processes=2, threads=1, on_start=lambda job: None,
                 on_done=lambda job, result: done.append(job.name))
    assert done == ["slow"]  # the running job finished and was recorded; no new job started after the failure


def test_an_unpicklable_error_arrives_as_its_text():
    class Local(Exception):  # defined in a function: cannot be pickled
        pass

    assert "Local: no pickle" in str(concurrent._transferable(Local("no pickle"), "job"))


def test_a_child_killed_by_a_signal_is_named_with_the_signal():
    with pytest.raises(RunProcessFailed, match=r"seed0/entropic ended with signal SIGKILL.*resume"):
        run_jobs([Job("seed0/entropic", _kill_myself, ())], processes=1, threads=1,
                 on_start=lambda job: None, on_done=lambda job, result: None)


PARENT = textwrap.dedent("""
    import sys, time
    from agnostophobia.training.concurrent import Job, run_jobs
    from runs import write_pid_and_sleep

    if __name__ == "__main__":  # spawn imports this file again in each child
        run_jobs([Job("a", write_pid_and_sleep, (sys.argv[1],)), Job("b", write_pid_and_sleep, (sys.argv[2],))],
                 processes=2, threads=1, on_start=lambda job: None, on_done=lambda job, result: None)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_die_with_their_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    assert_children_die_with_their_parent(script, [tmp_path / "a.pid", tmp_path / "b.pid"])


# --------------------------------------------------------------------- whole reproductions
def _outputs(run, approach):
    with np.load(run / "seed0" / approach / "outputs.npz") as data:
        return {key: data[key] for key in data.files}


def _equal_outputs(a, b, approaches=("softmax", "entropic")):
    for approach in approaches:
        first, second = _outputs(a, approach), _outputs(b, approach)
        assert first.keys() == second.keys()
        for key in first:
            np.testing.assert_array_equal(first[key], second[key], err_msg=f"{approach} {key}")


@pytest.fixture(scope="module")
def one_thread_config(tmp_path_factory):
    """The tiny reproduction with one thread per run, so that runs in turn and at once compute alike."""
    return write_config(tmp_path_factory.mktemp("config") / "one-thread.yaml", cpu_threads=1)


@pytest.fixture(scope="module")
def in_turn(one_thread_config, real_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("in-turn") / "run"
    result = run_cli(reproduce_args(one_thread_config, out, real_data_dir) + ["--concurrent-runs", "1"])
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow  # 10-27 s: make test stays within its time; CI runs it with the slow tests
def test_a_concurrent_reproduction_equals_one_trained_run_after_run(in_turn, one_thread_config, real_data_dir,
                                                                    tmp_path):
    out = tmp_path / "at-once"
    result = run_cli(reproduce_args(one_thread_config, out, real_data_dir) + ["--concurrent-runs", "2"])
    assert result.returncode == 0, result.stderr
    assert "2 at a time" in result.stdout
    _equal_outputs(in_turn, out)
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["concurrent_runs"] == 2 and "2 runs at a time, 1 thread(s) each" in meta["device"]
    assert json.loads((in_turn / "run_meta.json").read_text())["concurrent_runs"] == 1
    wall = json.loads((out / "wall_time.json").read_text())
    assert 0 < meta["wall_time_s"] == round(wall["training_s"], 1)
    assert set(meta["timings_s"]) == {"seed0/softmax", "seed0/entropic"}


# ~25 s on two cores: with the tests marked slow (make test-slow, CI)
@pytest.mark.slow
def test_a_killed_concurrent_reproduction_resumes_to_the_same_result(in_turn, one_thread_config, real_data_dir,
                                                                     tmp_path):
    out = tmp_path / "killed"
    args = reproduce_args(one_thread_config, out, real_data_dir) + ["--concurrent-runs", "2"]
    # every child kills itself after its first epoch's checkpoint, as an out-of-memory killer would
    result = run_cli(args, kill_at="epoch-end:1")
    assert result.returncode == 1
    assert "ended with signal SIGKILL" in result.stderr and "resume" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (out / "seed0" / "entropic" / "outputs.npz").exists()
    result = run_cli(args)
    assert result.returncode == 0, result.stderr
    _equal_outputs(in_turn, out)


# ~20 s on two cores: with the tests marked slow (make test-slow, CI)
@pytest.mark.slow
def test_a_killed_training_keeps_the_wall_time_of_the_runs_it_finished(one_thread_config, real_data_dir, tmp_path):
    out = tmp_path / "killed-after-one"
    args = reproduce_args(one_thread_config, out, real_data_dir) + ["--concurrent-runs", "1"]
    # killed after the first of the second run's two epochs: the first run finished, the second did not
    result = run_cli(args, kill_at="epoch-end:3")
    assert result.returncode != 0
    assert list(json.loads((out / "timings.json").read_text())) == ["seed0/softmax"]
    first = json.loads((out / "wall_time.json").read_text())["training_s"]
    assert first > 0
    result = run_cli(args)
    assert result.returncode == 0, result.stderr
    # the resumption adds its own time to the first invocation's, whatever the runs' own times sum to
    wall = json.loads((out / "wall_time.json").read_text())["training_s"]
    assert wall > first
    assert json.loads((out / "run_meta.json").read_text())["wall_time_s"] == round(wall, 1)
