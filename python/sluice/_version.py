"""The Sluice release version (the same number as `sluice --version`)."""

__version__ = "0.1.0"
