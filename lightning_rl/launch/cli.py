"""``lightning-rl launch <grid.yaml>``: write a grid's variants and run them here, or submit them to Slurm.

Examples::

    lightning-rl launch configs/grids/ppo_cartpole_lr_seed.yaml                  # 1 core per run, all cores busy
    lightning-rl launch grid.yaml --cpu_per_run 2 --parallel 3                   # 3 runs at a time, 2 cores each
    lightning-rl launch grid.yaml --gpu_per_run 1 --runs_per_gpu 2 --cpu_per_run 4 --hyperthreads
    lightning-rl launch grid.yaml --dry_run                                      # the variants and slots, nothing run
    lightning-rl launch grid.yaml --slurm --partition gpu --time_min 240 --cpus_per_task 8 --gpus_per_task 1

The variants go to ``--grid_dir`` (default: the grid file's ``grid_dir``, else ``runs/grids/<grid name>``),
one directory each with ``config.yaml`` and ``variant.yaml``. Launching again resumes: ``done``
variants are skipped and unfinished ones continue from their ``last.ckpt``. Exit status: 0 when every
variant finished, 1 when one failed, 2 for bad input, 128 + the signal when the launcher was stopped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lightning_rl.launch.affinity import machine_cpus, machine_gpus, make_affinity
from lightning_rl.launch.local import grid_lock, launch_local, print_summary
from lightning_rl.launch.variants import Grid, load_grid, write_variants

PROG = "lightning-rl launch"


def build_parser() -> argparse.ArgumentParser:
    """The options of ``lightning-rl launch``."""
    parser = argparse.ArgumentParser(
        # The module docstring, without its reST markup: a terminal shows ``x`` as written.
        prog=PROG, description=(__doc__ or "").replace("``", "").replace("::", ":"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("grid", help="a grid YAML file (base config, levels, overrides, names)")
    parser.add_argument("--grid_dir", default=None, help="where the variant directories go")
    parser.add_argument("--dry_run", action="store_true", help="write the variants and print the plan; run nothing")
    local = parser.add_argument_group("local launcher (rlpyt's affinity)")
    local.add_argument("--cpu_per_run", type=int, default=1, help="physical cores per run (default 1)")
    local.add_argument("--gpu_per_run", type=int, default=0, help="GPUs per run (default 0: CPU runs)")
    local.add_argument("--runs_per_gpu", type=int, default=1, help="runs sharing one GPU (default 1)")
    local.add_argument("--hyperthreads", action="store_true", help="give each run its cores' hyperthreads too")
    local.add_argument("--parallel", type=int, default=None, help="runs at a time (default: one per slot)")
    local.add_argument("--run_timeout_s", type=float, default=None, help="stop a run after this long (default: none)")
    slurm = parser.add_argument_group("Slurm through submitit (the slurm extra)")
    slurm.add_argument("--slurm", action="store_true", help="submit the variants to Slurm instead of running them here")
    slurm.add_argument("--cluster", default="slurm", choices=["slurm", "local", "debug"],
                       help="submitit's executor: slurm, or local/debug to try the jobs on this machine")
    slurm.add_argument("--partition", default=None, help="Slurm partition")
    slurm.add_argument("--time_min", type=int, default=60, help="time limit per job in minutes (default 60)")
    slurm.add_argument("--cpus_per_task", type=int, default=1, help="CPUs per job (default 1)")
    slurm.add_argument("--gpus_per_task", type=int, default=0, help="GPUs per job (default 0)")
    slurm.add_argument("--mem_gb", type=float, default=None, help="memory per job in GB")
    slurm.add_argument("--jobs", choices=["array", "each"], default="array",
                       help="one job array (default) or one job per variant")
    slurm.add_argument("--array_parallelism", type=int, default=None, help="array tasks running at once")
    slurm.add_argument("--wait", action="store_true", help="wait for the jobs (up to their time limit) and report")
    return parser


def main(argv: list[str]) -> int:
    """Run ``lightning-rl launch`` with ``argv``; the exit status."""
    options = build_parser().parse_args(argv)
    try:
        grid = load_grid(options.grid)
        grid_dir = Path(options.grid_dir or grid.grid_dir or Path("runs") / "grids" / Path(options.grid).stem)
        if options.slurm:
            return _slurm(options, grid, grid_dir)
        slots = make_affinity(
            machine_cpus(), machine_gpus() if options.gpu_per_run else [],
            cpu_per_run=options.cpu_per_run, gpu_per_run=options.gpu_per_run,
            runs_per_gpu=options.runs_per_gpu, hyperthreads=options.hyperthreads,
        )
        parallel = len(slots) if options.parallel is None else options.parallel
        if not 1 <= parallel <= len(slots):
            raise ValueError(
                f"--parallel {parallel}: the affinity gives {len(slots)} slot(s); run 1 to {len(slots)} at a time"
            )
        with grid_lock(grid_dir):
            dirs = write_variants(grid.base, grid.variants, grid_dir, grid.overrides)
            print(f"grid {grid_dir}: {len(dirs)} variants of {grid.base.name}, {parallel} at a time")
            for slot in slots[:parallel]:
                print(f"  slot {slot.index}: cpus {list(slot.cpus)}, {slot.threads} thread(s), "
                      f"CUDA_VISIBLE_DEVICES={slot.cuda_visible_devices}")
            if options.dry_run:
                for d in dirs:
                    print(f"  {d}")
                return 0
            sys.stdout.flush()
            results, stopped_by = launch_local(dirs, slots, parallel, run_timeout_s=options.run_timeout_s)
    except ValueError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    print_summary(results)
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        print(f"failed: {r.name} (exit {r.exit_status}), log: {r.log}")
    if stopped_by is not None:
        print(f"stopped by signal {stopped_by}; launch again to resume the unfinished variants")
        return 128 + stopped_by
    return 1 if failed else 0


def _slurm(options: argparse.Namespace, grid: Grid, grid_dir: Path) -> int:
    """``--slurm``: write the variants and submit those not done (submitit, imported only here)."""
    try:
        from lightning_rl.launch.slurm import submit_grid, wait_for
    except ModuleNotFoundError as error:
        if error.name != "submitit":
            raise
        print(f"{PROG}: error: --slurm needs submitit: pip install 'lightning-rl[slurm]'", file=sys.stderr)
        return 2
    dirs = write_variants(grid.base, grid.variants, grid_dir, grid.overrides)
    if options.dry_run:
        print(f"grid {grid_dir}: {len(dirs)} variants; nothing submitted (--dry_run)")
        return 0
    jobs = submit_grid(
        dirs, grid_dir / "submitit", cluster=options.cluster, partition=options.partition, time_min=options.time_min,
        cpus_per_task=options.cpus_per_task, gpus_per_task=options.gpus_per_task, mem_gb=options.mem_gb,
        array=options.jobs == "array", array_parallelism=options.array_parallelism, name=f"lrl-{grid_dir.name}",
    )
    print(f"grid {grid_dir}: {len(dirs)} variants, {len(jobs)} submitted ({len(dirs) - len(jobs)} done before)")
    for job in jobs:
        print(f"  job {job.job_id}")
    if not options.wait or not jobs:
        return 0
    outcomes = wait_for(jobs, timeout_s=options.time_min * 60.0 * 2)  # queueing time included
    for job_id, outcome in outcomes:
        print(f"  {job_id}: {outcome}")
    return 1 if any(o.startswith("failed") for _, o in outcomes) else 0
