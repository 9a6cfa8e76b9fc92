"""The learner's library: everything a notebook needs besides the model itself.

    toolkit.text       tokens, vocabularies, the built-in corpus, real corpora
    toolkit.batching   padded batches, length buckets, load_data
    toolkit.learning   the training loop, recipes, checkpoints, averaging
    toolkit.search     greedy decoding, the key-value cache, beam search
    toolkit.scoring    exact match, BLEU, chrF, scores by phenomenon
    toolkit.figures    loss curves, attention maps, the model diagram, stage diffs
    toolkit.checkers   exercise checkers, the tested properties, torch.nn side by side
    toolkit.train      the training command built on all of the above

What every stage file imports sits at the top: `stage_api` (the interface all stages share)
and `objectives` (the loss), with `outline`, `paths` and `device`. `translate` is the
command that translates a file with a trained checkpoint.
"""
