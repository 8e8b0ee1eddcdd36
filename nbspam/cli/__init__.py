"""The nbspam command: the one-message fast path (fast_start), the click commands and what they print."""
