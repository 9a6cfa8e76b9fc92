"""The course itself: one complete, self-contained Transformer per stage, 01 to 07, and
the appendix's stage 08, the decoder alone (notebook 14), which grows from stage 07.

Each module imports torch and the stage API only (see the README's "Where things are"), so
`make diff A=03 B=04` shows one idea."""
