"""``rec browse``: look at one or more .rec files in the browser."""

from __future__ import annotations

import asyncio
import webbrowser
from typing import Any

import click

from .common import err_console, handle_errors, out_console

__all__ = ["browse_command"]

_LOCAL = ("127.0.0.1", "localhost", "::1")


@click.command("browse")
@click.argument("recs", nargs=-1, required=True, metavar="REC...")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to serve at; another than this machine's own only when asked (it warns).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="The port (0: a free one).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the system browser.")
@click.option(
    "--workers", type=click.IntRange(1, 64), default=2, show_default=True,
    help="Threads making thumbnails.",
)  # fmt: skip
def browse_command(
    recs: tuple[str, ...], host: str, port: int, open_browser: bool, workers: int
) -> None:
    """Look at .rec files in the browser.

    A local web page: a grid of thumbnails with their keys, class names and
    boxes; filters with counts (classes, broken labels, undecodable images,
    image sizes and aspects) and charts, from a scan in the background that
    is kept for the next run (a remote rec is scanned only when asked); each
    record's fields, full image and payload, and draws of it through the
    training augmenters; the class counts of several recs side by side. It
    prints the address with a token for this run (every request needs it);
    it only reads. Ctrl-C stops it.

    \b
    Examples:
      rec browse train.rec val.rec
      rec browse voc_trainval.rec --open
      rec browse train.rec --port 0
    """
    from ..browse import Browsed, BrowseOptions, make_app

    with handle_errors(writes=False):
        datasets = [Browsed(rec) for rec in recs]
        options = BrowseOptions(host, port, workers=workers)
        if host not in _LOCAL:
            err_console().print(
                f"[yellow]Serving at {host}: anyone who can reach it and has the address "
                "(with its token) can read these records.[/]"
            )
        asyncio.run(_serve(make_app(datasets, options), options, open_browser))


async def _serve(app: object, options: object, open_browser: bool) -> None:
    from aiohttp import web

    from ..browse import BrowseOptions

    assert isinstance(app, web.Application) and isinstance(options, BrowseOptions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, options.host, options.port)
    try:
        await site.start()
        server: Any = site._server  # noqa: SLF001 - the port bound (0: a free one)
        sockets = server.sockets if server is not None else []
        port = sockets[0].getsockname()[1] if sockets else options.port
        shown = f"[{options.host}]" if ":" in options.host else options.host
        address = f"http://{shown}:{port}/?token={options.token}"
        out_console().print(f"rec browse: {address}", soft_wrap=True, markup=False)
        if open_browser:
            webbrowser.open(address)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
