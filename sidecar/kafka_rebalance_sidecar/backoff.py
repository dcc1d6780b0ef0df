"""Jittered exponential backoff for every wait the sidecar repeats (a Kafka outage, a refused or
failing delivery, an application pushing back).

Why jitter: a broker restart or an application's dependency coming back is seen by a whole fleet
of sidecars at the same moment. Without jitter they all retry at 0.25 s, 0.5 s, 1 s, ... in
lockstep and hit the recovering broker or app together; with it each wait is a random point in
the upper half of the doubling window ("equal jitter": never shorter than half the window, so a
sidecar still backs off, never longer than the window).

The arithmetic is tenacity's (`wait_exponential` for the fixed half, `wait_random_exponential`
for the random half, combined with `+` as tenacity composes waits), so no table of delays is kept
here. tenacity draws from the module-level `random`, which Python seeds from the OS at start-up:
every process gets its own sequence.
"""

from __future__ import annotations

from tenacity import RetryCallState, Retrying, wait_exponential, wait_random_exponential

# A wait strategy is called with a retry state; only its attempt number is read.
_RETRYING = Retrying()


class Backoff:
    """Waits that start at `first_s`, double per failure and stop growing at `max_s`; the wait
    after `failures` consecutive failures is a random point in [window / 2, window], window =
    min(max_s, first_s * 2 ** (failures - 1))."""

    def __init__(self, first_s: float, max_s: float) -> None:
        if first_s < 0 or max_s < first_s:
            raise ValueError(f"backoff {first_s} s to {max_s} s: need 0 <= first <= max")
        self.first_s = first_s
        self.max_s = max_s
        half_first, half_max = first_s / 2, max_s / 2
        self._wait = wait_exponential(multiplier=half_first, max=half_max) + (
            wait_random_exponential(multiplier=half_first, max=half_max)
        )

    def window(self, failures: int) -> float:
        """The longest wait after `failures` (>= 1) consecutive failures."""
        # 2.0 ** 1024 overflows a float; the cap is reached long before
        exponent = min(max(1, failures) - 1, 1000)
        return min(self.max_s, self.first_s * 2.0**exponent)

    def wait(self, failures: int) -> float:
        """Seconds to wait after `failures` (>= 1) consecutive failures."""
        if self.first_s == 0:
            return 0.0
        state = RetryCallState(_RETRYING, None, (), {})
        state.attempt_number = max(1, failures)
        return float(self._wait(state))
