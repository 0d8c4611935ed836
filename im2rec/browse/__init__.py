"""``rec browse``: one or more ``.rec`` files served to a local web page
(the grid of thumbnails, filters by class with counts, the record view)
by an aiohttp server that only reads, behind a per-run token."""

from __future__ import annotations

from .records import Browsed
from .server import BrowseOptions, make_app

__all__ = ["BrowseOptions", "Browsed", "make_app"]
