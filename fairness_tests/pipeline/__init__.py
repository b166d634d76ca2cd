"""The pipeline: configuration, protocols registry, audit, recordings, scored runs, gate."""
