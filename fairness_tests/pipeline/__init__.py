"""The pipeline: configuration, the benchmark interface, audit, recordings, scored runs, gate."""
