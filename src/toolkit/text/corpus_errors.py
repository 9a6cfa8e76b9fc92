"""The two ways a corpus can fail to load, each with a message that says what to do."""


class CorpusUnavailable(RuntimeError):
    """The requested corpus cannot be loaded here; the message says what to use instead."""


class CorpusError(ValueError):
    """A corpus file or row that cannot be read; the message names the file and the line."""
