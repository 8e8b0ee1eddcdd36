"""Settings and the small mechanisms every layer uses: configuration, worker processes, lazy scipy."""
