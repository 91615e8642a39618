"""Layout changes: adopt, expand, shrink (the producer barrier) and unadopt."""
