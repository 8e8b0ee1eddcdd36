"""Services that read and write models: filtering, sync, updates under a lock, the numpy-free scorer, the Dask cluster."""
