"""Trims: DeleteRecords, the trim rules, retention and history compaction."""
