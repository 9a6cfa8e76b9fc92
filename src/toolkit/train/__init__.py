"""The training command: `python -m toolkit.train` on one process, `torchrun -m
toolkit.train.ddp` on several, built on the library and never imported by it."""
