"""The run directory: results and typed metadata (the one interchange format)."""
