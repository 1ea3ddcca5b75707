"""Pure relay rules: classification, dependency order, head selection, results.

Synchronous and side-effect free; the ingest layer and Spark jobs reuse them.
"""
