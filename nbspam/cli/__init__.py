"""The nbspam command: the one-message fast path (entry), the click commands and what they print."""
