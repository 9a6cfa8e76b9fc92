"""`python -m toolkit.train`: the training command on one process."""

import sys
import time

started = time.perf_counter()  # --time-limit counts from here, before the imports that follow

from toolkit.train.command import main  # noqa: E402

sys.exit(main(started=started))
