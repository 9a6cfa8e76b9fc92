"""Corpora from the Hugging Face Hub, failing at once with the reason when it cannot answer."""

import os
from pathlib import Path

import datasets
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import GatedRepoError, HTTPError, RepositoryNotFoundError

from toolkit.text.corpus_errors import CorpusError, CorpusUnavailable

OPUS100 = "Helsinki-NLP/opus-100"
HUB_TIMEOUT_SECONDS = 5


def hub_offline() -> bool:
    """HF_HUB_OFFLINE, read now: a notebook may set it after huggingface_hub was imported."""
    from_environment = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    return constants.HF_HUB_OFFLINE or from_environment


def _unavailable(name: str, reason: str) -> CorpusUnavailable:
    """The error for an unreachable Hub, saying how to carry on with the built-in corpus."""
    return CorpusUnavailable(
        f"The Hugging Face Hub is unreachable ({reason}), so {name} cannot be loaded. "
        'Use the built-in corpus instead: load_corpus() or load_corpus("builtin"), '
        f"or a corpus file on this machine.{_if_a_folder(name)}")


def _if_a_folder(name: str) -> str:
    """A Hub id and a relative folder look alike ("mydata/corpus"): name the folder looked for."""
    if "/" not in name:
        return ""
    return (f" If {name} is meant as a folder on this machine, there is none at "
            f"{Path(name).resolve()}.")


def load_hub(name: str, config: str | None) -> datasets.DatasetDict:
    """Download a Hub dataset, failing at once (not after 20 s of retries) if the Hub is away."""
    if hub_offline():
        raise _unavailable(name, "HF_HUB_OFFLINE is set")
    try:
        HfApi().dataset_info(name, timeout=HUB_TIMEOUT_SECONDS)
    except GatedRepoError as err:  # reached, and it answered: not an unreachable Hub
        raise CorpusError(f"{name} is gated on the Hub: accept its terms on its page, then log "
                          f"in with `hf auth login`") from err
    except RepositoryNotFoundError as err:
        raise CorpusError(f"the Hub has no dataset {name} (or it is private): check the "
                          f"name.{_if_a_folder(name)}") from err
    except (OSError, HTTPError) as err:
        raise _unavailable(name, f"{type(err).__name__}: {err}") from err
    try:
        splits = datasets.load_dataset(name, config)
    except ConnectionError as err:
        raise _unavailable(name, str(err)) from err
    if "train" not in splits:
        raise CorpusError(f"{name} ({config}) has no train split, only {', '.join(splits)}: "
                          f"give a corpus with one, or a local folder with train.jsonl")
    return splits
