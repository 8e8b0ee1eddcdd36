"""nbspam: a Naive Bayes spam and text classifier that is exact, fast and easy to inspect."""

__version__ = "0.1.0"
