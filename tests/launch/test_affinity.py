"""Run slots worked out by hand from rlpyt's affinity rules (cores per run, GPUs per run, runs per GPU,
hyperthreads)."""

from __future__ import annotations

import pytest

from lightning_rl.launch.affinity import Slot, make_affinity, slot_environment


def test_cpu_runs_take_consecutive_blocks_of_cores() -> None:
    assert make_affinity(range(4), cpu_per_run=2) == [Slot(0, (0, 1), 2, None), Slot(1, (2, 3), 2, None)]
    # A leftover core (5 // 2 = 2 slots) stays idle rather than joining a run.
    assert [s.cpus for s in make_affinity(range(5), cpu_per_run=2)] == [(0, 1), (2, 3)]


def test_cpu_ids_are_the_machines_own_not_zero_based() -> None:
    # A container allowed CPUs 3, 5 and 6 only.
    assert [s.cpus for s in make_affinity([3, 5, 6])] == [(3,), (5,), (6,)]


def test_hyperthreads_add_each_cores_sibling_and_do_not_add_threads() -> None:
    # 8 logical CPUs: cores 0-3, their hyperthreads 4-7 (Linux's numbering, rlpyt's hyperthread_offset 4).
    slots = make_affinity(range(8), cpu_per_run=2, hyperthreads=True)
    assert [s.cpus for s in slots] == [(0, 1, 4, 5), (2, 3, 6, 7)]
    assert [s.threads for s in slots] == [2, 2]


def test_runs_spread_over_gpus_first_and_a_gpus_runs_sit_on_neighbouring_cores() -> None:
    slots = make_affinity(range(8), ["0", "1"], gpu_per_run=1, runs_per_gpu=2, hyperthreads=True)
    # Slot i: GPU i % 2; core block (i % 2) * 2 + i // 2 -> blocks 0, 2, 1, 3.
    assert [(s.cpus, s.cuda_visible_devices) for s in slots] == [
        ((0, 4), "0"), ((2, 6), "1"), ((1, 5), "0"), ((3, 7), "1"),
    ]


def test_several_gpus_per_run_and_gpu_ids_as_cuda_visible_devices_names_them() -> None:
    slots = make_affinity(range(8), ["4", "5", "6", "7"], gpu_per_run=2, cpu_per_run=4)
    assert [(s.cpus, s.cuda_visible_devices) for s in slots] == [((0, 1, 2, 3), "4,5"), ((4, 5, 6, 7), "6,7")]


def test_cpu_runs_on_a_gpu_machine_see_no_gpu() -> None:
    assert [s.cuda_visible_devices for s in make_affinity(range(2), ["0"])] == ["", ""]


def test_slot_environment_sets_threads_and_gpus() -> None:
    assert slot_environment(Slot(0, (2, 3), 2, "1")) == {
        "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "1"}
    assert "CUDA_VISIBLE_DEVICES" not in slot_environment(Slot(0, (0,), 1, None))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cpus": range(2), "cpu_per_run": 3}, "cpu_per_run=3 asks for more cores than the machine has"),
    ({"cpus": range(4), "cpu_per_run": 3, "hyperthreads": True}, "more cores than the machine has .2 physical"),
    ({"cpus": range(2), "gpu_per_run": 1}, "gpu_per_run=1 asks for more GPUs than the machine has .0"),
    ({"cpus": range(4), "gpus": ["0", "1"], "gpu_per_run": 1, "runs_per_gpu": 2, "cpu_per_run": 2},
     "4 GPU runs x cpu_per_run=2 ask for more cores"),
    ({"cpus": range(4), "gpus": ["0", "1"], "gpu_per_run": 2, "runs_per_gpu": 2}, "give one of them above 1"),
    ({"cpus": range(3), "hyperthreads": True}, "3 logical CPUs cannot be cores plus one sibling"),
    ({"cpus": range(2), "cpu_per_run": 0}, "cpu_per_run must be at least 1"),
    ({"cpus": [0, 0]}, "distinct CPU ids"),
])
def test_impossible_requests_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_affinity(**kwargs)
