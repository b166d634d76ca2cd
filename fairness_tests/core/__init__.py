"""Core: errors, paths, I/O, validation, locks, the project directory."""
