"""tally: small counting and ranging helpers (a fixture project for `flotilla synth`)."""
from tally.core import chunks, clamp, count_if, is_sorted, mean
