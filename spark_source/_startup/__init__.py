"""A start-up hook for the Python processes Spark starts for ``ordered-kafka``.

This folder (not the package) goes on the ``PYTHONPATH`` that Spark gives the
source's and the sink's Python processes (see :mod:`spark_source.workers`), so Python
imports its ``sitecustomize`` module at start-up. Nothing else imports it.
"""
