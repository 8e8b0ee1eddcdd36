"""Evaluation: out-of-sample scores, online (chronological) evaluation, reports and plots."""
