"""The version of im2rec, in one place below everything that records it
(manifests, ``rec --version``); pyproject.toml's must match (tested)."""

__version__ = "0.2.0"
