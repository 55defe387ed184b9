"""Baton: a serverless checkpoint API for AI agents."""

__version__ = "0.1.0"
