"""From a message or a table to counts: tokens, features, count rows, the vocabulary, typed tables."""
