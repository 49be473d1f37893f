"""``python -m lightning_rl``: the ``lightning-rl`` command (:mod:`lightning_rl.cli`)."""

from lightning_rl.cli import main

if __name__ == "__main__":
    main()
