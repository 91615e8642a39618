"""Build the optional compiled send path (``ordered._fastproduce``); metadata is in pyproject.

``optional=True``: without a C compiler or the Python headers the build goes on without
it and ``OrderedProducer`` uses its pure-Python send path (same behaviour, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ordered._fastproduce",
            ["ordered/_fastproduce.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        # The consumer's batch scan (ordered/consumer/scan.py has its reference).
        Extension(
            "ordered._fastconsume",
            ["ordered/_fastconsume.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
