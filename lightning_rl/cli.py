"""The ``lightning-rl`` command (LightningCLI). Replaced by the full CLI with the training core."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("lightning-rl: no algorithm yet", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
