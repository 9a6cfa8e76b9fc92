"""The course's own machinery, for whoever maintains it: the ladder and the ablation that
produce the committed results, the gate that says when they are stale, the mutation
runner, the paper run, and the student copies of the notebooks."""
