"""Signals that ask a run to stop at the end of a step, after saving."""

import signal


class StopRequests:
    """Ctrl-C or SIGTERM (a pre-empted machine) ask the run to stop after this step with a
    checkpoint; a second Ctrl-C stops at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.signal: int | None = None

    def __enter__(self) -> "StopRequests":
        self.previous = {number: signal.signal(number, self._request) for number in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def _request(self, number: int, frame) -> None:
        if self.signal is not None and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = number
