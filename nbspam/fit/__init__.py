"""Fitting: cross-validation, selection of the event model, calibration of the cutoffs, training, settings."""
