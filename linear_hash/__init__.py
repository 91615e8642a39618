"""linear_hash package."""
