"""The response store: every answer asked once and kept (:mod:`.store`), its schema,
JSONL recordings, leases, merges, backend fingerprints, replay, secret scrubbing and
the server capabilities it remembers. Imports ``requests`` only."""
