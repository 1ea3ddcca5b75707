"""Store-then-verify ingestion: per-kind handlers over a staged view, one
serialized sequencing session per batch (see ``pipeline``)."""
