"""What a checkpoint must hold besides the weights for a run to go on exactly where it stopped.

The next step depends on the weights, Adam's moments, the schedule's position, the data
position (the step count: toolkit.train.batch_plan) and every random stream training draws from:
torch's (dropout), the objective's generator, and the GPU's. Keep all of them and a resumed
run takes bit for bit the steps it would have taken (on CPU; tested). And a checkpoint only
fits the run that wrote it: another model, recipe, corpus or tokenizer is refused, naming
what differs.
"""

import hashlib
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from toolkit.batching.batches import EncodedPair
from toolkit.learning.checkpoints import FORMAT, CheckpointError, vocab_entry
from toolkit.learning.training import PaperOptimizer
from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import Vocab


@dataclass
class Progress:
    """Where the run is: saved in every checkpoint, restored on resume."""

    step: int = 0
    best_bleu: float | None = None
    best_step: int | None = None
    evaluations_since_best: int = 0
    seconds: float = 0.0
    evaluations: int = 0


def random_streams(generator: torch.Generator, device: torch.device | None = None,
                   ) -> dict[str, torch.Tensor | list]:
    """The state of every random stream training reads: on a GPU, the state of this process's
    own device only, so a resume on a machine with fewer GPUs visible still finds it."""
    streams = {"torch": torch.get_rng_state(), "objective": generator.get_state()}
    if device is not None and device.type == "cuda":
        streams["cuda"] = torch.cuda.get_rng_state(device)
    if device is not None and device.type == "mps":
        streams["mps"] = torch.mps.get_rng_state()
    return streams


def restore_random_streams(streams: dict, generator: torch.Generator,
                           device: torch.device | None = None) -> None:
    torch.set_rng_state(streams["torch"])
    generator.set_state(streams["objective"])
    if "cuda" in streams and device is not None and device.type == "cuda":
        state = streams["cuda"]
        if isinstance(state, list):  # as older runs wrote it: every GPU's state, in order
            index = device.index or 0
            if index >= len(state):
                raise CheckpointError(f"this checkpoint kept the random state of {len(state)} "
                                      f"GPUs and this process trains on GPU {index}: resume on "
                                      f"as many GPUs as the run used")
            state = state[index]
        torch.cuda.set_rng_state(state, device)
    if "mps" in streams and device is not None and device.type == "mps":
        torch.mps.set_rng_state(streams["mps"])


def optimizer_state(optimizer: PaperOptimizer) -> dict:
    """Adam's moments and step counts, the schedule's position and the loss scaler's."""
    return {"adam": optimizer.optimizer.state_dict(),
            "schedule": optimizer.scheduler.state_dict(), "scaler": optimizer.scaler.state_dict()}


def restore_optimizer(optimizer: PaperOptimizer, state: dict) -> None:
    optimizer.optimizer.load_state_dict(state["adam"])
    optimizer.scheduler.load_state_dict(state["schedule"])
    optimizer.scaler.load_state_dict(state["scaler"])


def data_fingerprint(
    src_vocab: Vocab | SubwordVocab, tgt_vocab: Vocab | SubwordVocab,
    pairs: Sequence[EncodedPair],
) -> str:
    """A hash of the vocabularies and every encoded training pair: same corpus, same tokens."""
    digest = hashlib.sha256()
    for vocab in (src_vocab, tgt_vocab):
        digest.update(json.dumps(vocab_entry(vocab), sort_keys=True).encode())
    # Pickled straight into the hash, frame by frame: the same bytes as pickle.dumps, without
    # holding them all (about 1.5 GB for 4.5 million pairs, on every process).
    pickle.Pickler(_Hashing(digest), protocol=5).dump(list(pairs))
    return digest.hexdigest()


class _Hashing:
    """A file that only feeds what is written to it into a hash."""

    def __init__(self, digest: "hashlib._Hash"):
        self.write = digest.update


def load_run_state(path: Path) -> dict:
    """The whole checkpoint, training state included, or a message that says what to do.

    Loaded on the CPU: random states must be CPU tensors, and load_state_dict moves the
    weights and Adam's moments to wherever the model is.
    """
    if not path.exists():
        raise CheckpointError(f"--resume: there is no checkpoint at {path} to resume from: "
                              f"start without --resume, or give the run's --output folder")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise CheckpointError(f"{path} cannot be read ({type(err).__name__}: {err}): it is not "
                              f"a checkpoint this command wrote") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT \
            or "training" not in payload:
        raise CheckpointError(f"{path} holds no training state (only a run's last.pt does): "
                              f"it cannot be resumed")
    return payload


# Settings added since a checkpoint may have been written, and what such a run did.
SETTINGS_BEFORE = {"fast_path": False}


def check_same_run(training: dict, settings: dict, fingerprint: str, world_size: int,
                   path: Path) -> None:
    """Refuse a checkpoint from another configuration, corpus or tokenizer, saying what differs."""
    saved = SETTINGS_BEFORE | training["settings"]
    differences = [f"--{name.replace('_', '-')}: the checkpoint has {saved.get(name)!r}, this "
                   f"run {settings.get(name)!r}"
                   for name in sorted(set(saved) | set(settings))
                   if saved.get(name) != settings.get(name)]
    if training["world_size"] != world_size:
        differences.append(f"processes: the checkpoint was trained on {training['world_size']}, "
                           f"this run has {world_size}")
    if not differences and training["data"] != fingerprint:
        differences.append("the corpus gives other training pairs or vocabularies than the "
                           "checkpoint's (same options, but the files changed?)")
    if differences:
        raise CheckpointError(f"{path} is from another run, so it cannot be resumed:\n  "
                              + "\n  ".join(differences)
                              + "\nResume with the options it was trained with, or train "
                                "afresh into another --output folder")
