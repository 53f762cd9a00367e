"""Fixtures shared across the test packages."""

from tests.browser import chromium

__all__ = ["chromium"]
