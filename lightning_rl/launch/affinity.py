"""Run slots of a machine: rlpyt's ``encode_affinity`` / ``make_affinity`` as one pure function.

:func:`make_affinity` divides a machine's CPU cores (and GPUs) into *slots*, one run each, as
rlpyt's affinity codes do: ``cpu_per_run`` physical cores per run; with GPUs, ``gpu_per_run`` GPUs
per run or ``runs_per_gpu`` runs sharing each GPU; ``hyperthreads`` adds each core's sibling. The
launcher pins each child to its slot (``os.sched_setaffinity``), gives it as many torch/OpenMP/MKL
threads as it has physical cores (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) and its GPUs through
``CUDA_VISIBLE_DEVICES``; a sampler's worker count stays what the config says.

Example (4 physical cores with hyperthreads 4-7, 2 GPUs, 2 runs per GPU)::

    >>> [s.cpus for s in make_affinity(range(8), ["0", "1"], gpu_per_run=1, runs_per_gpu=2, hyperthreads=True)]
    [(0, 4), (2, 6), (1, 5), (3, 7)]

Slots 0 and 1 go to GPUs 0 and 1 (runs spread over the GPUs first, as rlpyt's), and the two runs of
one GPU sit on neighbouring cores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Slot", "machine_cpus", "machine_gpus", "make_affinity", "slot_environment"]


@dataclass(frozen=True)
class Slot:
    """The hardware of one run.

    Attributes:
        index: The slot's number.
        cpus: Logical CPU ids for ``os.sched_setaffinity`` (the cores, then their hyperthreads).
        threads: Physical cores: the run's torch/OpenMP/MKL thread count.
        cuda_visible_devices: ``CUDA_VISIBLE_DEVICES`` for the run: its GPUs (``"0,1"``), ``""`` to hide
            a GPU machine's GPUs from a CPU run, None on a machine without GPUs (left as it is).
    """

    index: int
    cpus: tuple[int, ...]
    threads: int
    cuda_visible_devices: str | None


def make_affinity(
    cpus: Sequence[int],
    gpus: Sequence[str] = (),
    *,
    cpu_per_run: int = 1,
    gpu_per_run: int = 0,
    runs_per_gpu: int = 1,
    hyperthreads: bool = False,
) -> list[Slot]:
    """Divide a machine into run slots (rlpyt's affinity codes: cores per run, GPUs per run, runs per GPU,
    hyperthreads).

    Args:
        cpus: The machine's logical CPU ids (``os.sched_getaffinity(0)``). With ``hyperthreads``, the
            first half are the physical cores and the second half their siblings in the same order,
            Linux's numbering (rlpyt's ``hyperthread_offset`` = the number of physical cores).
        gpus: The machine's GPU ids as ``CUDA_VISIBLE_DEVICES`` names them.
        cpu_per_run: Physical cores per run.
        gpu_per_run: GPUs per run; 0 for CPU runs (then the slots are ``len(cores) // cpu_per_run``).
        runs_per_gpu: Runs sharing one GPU (with ``gpu_per_run=1``).
        hyperthreads: Give each run its cores' hyperthreads too.

    Returns:
        The slots, in the order runs take them.

    Raises:
        ValueError: If a count is below its minimum, the runs ask for more cores or GPUs than the
            machine has, ``hyperthreads`` meets an odd CPU count, or several GPUs per run meet several
            runs per GPU.
    """
    cpus = [int(c) for c in cpus]
    gpus = [str(g) for g in gpus]
    if not cpus or len(set(cpus)) != len(cpus):
        raise ValueError(f"cpus: expected distinct CPU ids, got {cpus}")
    for name, value, least in (("cpu_per_run", cpu_per_run, 1), ("gpu_per_run", gpu_per_run, 0),
                               ("runs_per_gpu", runs_per_gpu, 1)):
        if value < least:
            raise ValueError(f"{name} must be at least {least}, got {value}")
    if hyperthreads and len(cpus) % 2:
        raise ValueError(f"hyperthreads: {len(cpus)} logical CPUs cannot be cores plus one sibling each")
    n_cores = len(cpus) // 2 if hyperthreads else len(cpus)
    cores, siblings = cpus[:n_cores], cpus[n_cores:]
    if cpu_per_run > n_cores:
        raise ValueError(
            f"cpu_per_run={cpu_per_run} asks for more cores than the machine has ({n_cores} "
            f"{'physical ' if hyperthreads else ''}cores: {cores})"
        )
    if gpu_per_run == 0:
        gpu_sets: list[list[str]] = [[] for _ in range(n_cores // cpu_per_run)]
        blocks = list(range(len(gpu_sets)))
    else:
        if gpu_per_run > len(gpus):
            raise ValueError(f"gpu_per_run={gpu_per_run} asks for more GPUs than the machine has ({len(gpus)}: {gpus})")
        if gpu_per_run > 1 and runs_per_gpu > 1:
            raise ValueError(f"gpu_per_run={gpu_per_run} with runs_per_gpu={runs_per_gpu}: give one of them above 1")
        if gpu_per_run > 1:
            n_slots = len(gpus) // gpu_per_run
            gpu_sets = [gpus[i * gpu_per_run:(i + 1) * gpu_per_run] for i in range(n_slots)]
            blocks = list(range(n_slots))
        else:
            n_slots = len(gpus) * runs_per_gpu
            # Spread over the GPUs first; a GPU's runs take neighbouring blocks of cores.
            gpu_sets = [[gpus[i % len(gpus)]] for i in range(n_slots)]
            blocks = [(i % len(gpus)) * runs_per_gpu + i // len(gpus) for i in range(n_slots)]
        if n_slots * cpu_per_run > n_cores:
            raise ValueError(
                f"{n_slots} GPU runs x cpu_per_run={cpu_per_run} ask for more cores than the machine has ({n_cores})"
            )
    slots = []
    for index, (block, gpu_set) in enumerate(zip(blocks, gpu_sets, strict=True)):
        picked = list(range(block * cpu_per_run, (block + 1) * cpu_per_run))
        logical = tuple(cores[i] for i in picked) + (tuple(siblings[i] for i in picked) if hyperthreads else ())
        visible = ",".join(gpu_set) if gpu_per_run else ("" if gpus else None)
        slots.append(Slot(index, logical, cpu_per_run, visible))
    return slots


def machine_cpus() -> list[int]:
    """The logical CPUs this process may run on (a container's or ``taskset``'s limit included)."""
    return sorted(os.sched_getaffinity(0))


def machine_gpus() -> list[str]:
    """The GPUs a child may be given: ``CUDA_VISIBLE_DEVICES`` where it is set, else every CUDA device."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def slot_environment(slot: Slot) -> dict[str, str]:
    """The environment variables a run in ``slot`` gets: its thread counts and, where set, its GPUs."""
    env = {"OMP_NUM_THREADS": str(slot.threads), "MKL_NUM_THREADS": str(slot.threads)}
    if slot.cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = slot.cuda_visible_devices
    return env
