"""`python -m toolkit.train`: the training command on one process."""

import sys

from toolkit.train.command import main

sys.exit(main())
