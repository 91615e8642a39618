"""spark_source package."""
