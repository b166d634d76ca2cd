"""``--batch``: the requests the store lacks, asked through a provider's batch API
(:mod:`.batch`), its lines and price, and the store's ledger of jobs. The top floor of
``models``: the batch backend wraps the litellm one and stamps requests as the runner does."""
