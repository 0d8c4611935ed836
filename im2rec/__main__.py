"""``python -m im2rec`` runs the ``rec`` command."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
