"""The versioned object store, watches, compaction and selectors (above ``apiserver.api``)."""
