"""Asking a backend through the store: the runner (:mod:`.runner`), its progress bar and
``--shard``. Imports ``requests``, ``store`` and ``backends``."""
