"""``python -m mathgym ...``: the ``mathgym`` command, runnable where a launcher needs a module.

    accelerate launch --multi_gpu --num_processes 2 -m mathgym train --num-tasks 16
    torchrun --nproc_per_node 2 -m mathgym train --num-tasks 16
"""

import sys

from mathgym.cli import main

if __name__ == "__main__":
    sys.exit(main())
