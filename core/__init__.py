"""lookbench-live: the pipeline behind each release of the live LookBench benchmark."""

__version__ = "0.1.0"
