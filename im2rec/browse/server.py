"""The ``rec browse`` server: aiohttp, read only. Every request must carry
the run's token (the ``token`` query parameter, or the cookie the page's
first load sets); its Host must be the address served (DNS rebinding) and
an Origin, when sent, this page's (cross-site requests); every answer has
a Content-Security-Policy that lets the page load only its own files. No
request names a file-system path: datasets and records are numbers.
Thumbnails are made in a pool of ``workers`` threads (Pillow decodes
without the GIL), the background scans giving way to the page's requests
(:class:`~.priority.PageFirst`); a record that is not an image is an
answer saying why, never an error of the server."""

from __future__ import annotations

import asyncio
import hmac
import itertools
import secrets
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np
from aiohttp import web

from ..errors import ConfigError, Im2RecError
from ..imaging.codec import DECODE_ERRORS
from ..imaging.headers import image_extension
from ..recordio.detection import problem
from .charts import charts
from .preview import CLASSIFY, DETECT, MAX_DRAWS, Drawn, preview
from .priority import PageFirst
from .records import THUMB_SIDES, Browsed
from .scanning import Selection

__all__ = ["BrowseOptions", "make_app"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_COOKIE = "im2rec_browse"
#: why a record is a tile saying so, not an error of the server
_NOT_SHOWN: tuple[type[BaseException], ...] = (*DECODE_ERRORS, Im2RecError)
#: bind addresses of every interface: the Host a client uses is not known
#: (the token still guards every request)
_ANY = ("0.0.0.0", "::", "")
#: records a page of the grid may ask for
MAX_PAGE = 1000
#: augmentation draws kept for the page to fetch
MAX_DRAWN = 64


@dataclass
class BrowseOptions:
    """Where and how to serve: ``hosts`` the Host names accepted (with the
    port), the token, the thumbnail pool's threads."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    workers: int = 2


def _static(name: str) -> bytes:
    return (resources.files("im2rec.browse") / "static" / name).read_bytes()


_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
_IMAGE_TYPES = {".jpg": "image/jpeg", ".png": "image/png", ".gif": "image/gif",
                ".bmp": "image/bmp", ".webp": "image/webp"}  # fmt: skip


def make_app(datasets: list[Browsed], options: BrowseOptions) -> web.Application:
    """The application serving ``datasets``; their scans start with it."""
    pool = ThreadPoolExecutor(options.workers, thread_name_prefix="im2rec-browse")
    stop = threading.Event()
    page = PageFirst()
    drawn: OrderedDict[int, bytes] = OrderedDict()
    counter = itertools.count()
    allowed: set[str] = set()

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        if not allowed:
            port = request.transport.get_extra_info("sockname")[1] if request.transport else 0
            names = {options.host, "127.0.0.1", "localhost"} if options.host in (
                "127.0.0.1", "localhost") else {options.host}  # fmt: skip
            allowed.update(f"{name}:{port}" for name in names)
        if host not in allowed and options.host not in _ANY:
            return _refuse(403, "this server answers only at its own address")
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] not in (allowed | {host}):
            return _refuse(403, "cross-site requests are refused")
        given = request.query.get("token") or request.cookies.get(_COOKIE, "")
        if not hmac.compare_digest(given.encode(), options.token.encode()):
            return _refuse(403, "a token is required: open the address rec browse printed")
        if request.method not in ("GET", "HEAD"):
            return _refuse(405, "read only")
        if request.path == "/api/scan":  # (the page's polls of the scan: not in its way)
            response: web.StreamResponse = await handler(request)
        else:
            with page.serving():  # (the scans give way meanwhile)
                response = await handler(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        if request.query.get("token"):
            response.set_cookie(_COOKIE, options.token, httponly=True, samesite="Strict")
        return response

    def dataset(request: web.Request) -> Browsed:
        number = _number(request, "ds", 0, len(datasets) - 1, 0)
        return datasets[number]

    async def index(request: web.Request) -> web.StreamResponse:
        return web.Response(body=_static("index.html"), content_type="text/html")

    async def asset(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in ("app.js", "style.css"):
            raise web.HTTPNotFound()
        kind = _TYPES["." + name.rsplit(".", 1)[1]]
        return web.Response(body=_static(name), content_type=kind)

    async def listing(request: web.Request) -> web.StreamResponse:
        sets = [{"number": k, "name": d.name, "records": d.count,
                 "classes": {str(c): n for c, n in sorted(d.classes.items())}}
                for k, d in enumerate(datasets)]  # fmt: skip
        return web.json_response(
            {
                "sets": sets,
                "augment": {"classification": _table(CLASSIFY), "detection": _table(DETECT)},
            }
        )

    async def records(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        start = _number(request, "start", 0, max(ds.count, 1), 0)
        count = _number(request, "count", 1, MAX_PAGE, 100)
        seed = _number(request, "seed", 0, 2**63 - 1, 0) if request.query.get("seed") else None
        chosen = _selection(request)
        found = None
        if chosen != Selection():
            loop = asyncio.get_running_loop()
            found = await loop.run_in_executor(pool, ds.scanner.select, chosen)
            if found is None:
                return web.json_response({"total": None, "records": [], "pending": True})
        total = ds.count if found is None else len(found)
        places = ds.places(start, start + count, seed, total)
        chosen_records = places if found is None else found[places].tolist()
        loop = asyncio.get_running_loop()
        described = await loop.run_in_executor(
            pool, lambda: [ds.describe(i) for i in chosen_records]
        )
        return web.json_response({"total": total, "records": described})

    async def record(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        i = _number(request, "i", 0, ds.count - 1, 0)
        loop = asyncio.get_running_loop()
        return web.json_response(await loop.run_in_executor(pool, ds.describe, i, True))

    async def thumb(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        i = _number(request, "i", 0, ds.count - 1, 0)
        side = _number(request, "size", 16, 1024, 160)
        side = min(THUMB_SIDES, key=lambda s: abs(s - side))
        loop = asyncio.get_running_loop()
        try:
            data, kind = await loop.run_in_executor(pool, ds.thumbnail, i, side)
        except _NOT_SHOWN as exc:
            why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return web.json_response({"error": why}, status=422)
        return web.Response(body=data, content_type=kind)

    async def stored(request: web.Request, as_image: bool) -> web.StreamResponse:
        """A record's payload, exactly: to download, or (``as_image``) to
        show, under the type its signature names (422 if none a browser shows)."""
        ds = dataset(request)
        i = _number(request, "i", 0, ds.count - 1, 0)
        loop = asyncio.get_running_loop()
        try:
            _, data = await loop.run_in_executor(pool, ds.header, i)
        except Im2RecError as exc:
            return web.json_response({"error": str(exc)[:200]}, status=422)
        if not as_image:
            disposition = f'attachment; filename="record-{i}.bin"'
            return web.Response(body=data, content_type="application/octet-stream",
                                headers={"Content-Disposition": disposition})  # fmt: skip
        kind = _IMAGE_TYPES.get(image_extension(data[:16]) or "")
        if kind is None:
            return web.json_response({"error": "not an image format a browser shows"}, status=422)
        return web.Response(body=data, content_type=kind)

    async def payload(request: web.Request) -> web.StreamResponse:
        return await stored(request, as_image=False)

    async def image(request: web.Request) -> web.StreamResponse:
        return await stored(request, as_image=True)

    async def scan(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        if request.query.get("start") == "1":
            ds.scanner.start(stop, page)
        return web.json_response(ds.scanner.state(ds.classes))

    async def stats(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        loop = asyncio.get_running_loop()
        return web.json_response(await loop.run_in_executor(pool, charts, ds.scanner, ds.classes))

    async def augment(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        i = _number(request, "i", 0, ds.count - 1, 0)
        draws = _number(request, "draws", 1, MAX_DRAWS, 6)
        seed = _number(request, "seed", 0, 2**63 - 1, 0)
        kind = request.query.get("kind", "")
        if kind not in ("", "classification", "detection"):
            raise web.HTTPBadRequest(text="kind must be classification or detection")

        def work() -> tuple[bool, list[Drawn]]:
            header, data = ds.header(i)
            values = np.asarray(header.label, np.float32).reshape(-1)
            detection = kind == "detection" or (not kind and problem(values) is None)
            return detection, preview(data, values, detection, request.query, draws, seed)

        loop = asyncio.get_running_loop()
        try:
            detection, found = await loop.run_in_executor(pool, work)
        except ConfigError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except _NOT_SHOWN as exc:
            why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return web.json_response({"error": why}, status=422)
        out = []
        for one in found:
            number = next(counter)
            drawn[number] = one.jpeg
            while len(drawn) > MAX_DRAWN:
                drawn.popitem(last=False)
            boxes = [{"class": int(b[0]), "name": ds.classes.get(int(b[0]), str(int(b[0]))),
                      "box": b[1:5]} for b in one.boxes]  # fmt: skip
            out.append({"image": number, "width": one.width, "height": one.height,
                        "boxes": boxes})  # fmt: skip
        return web.json_response({"kind": "detection" if detection else "classification",
                                  "draws": out})  # fmt: skip

    async def drawn_image(request: web.Request) -> web.StreamResponse:
        number = _number(request, "n", 0, 2**63 - 1, 0)
        data = drawn.get(number)
        if data is None:
            raise web.HTTPNotFound(text="that draw is no longer kept: draw again")
        return web.Response(body=data, content_type="image/jpeg")

    async def started(app: web.Application) -> None:
        for ds in datasets:
            if not ds.reader.remote:  # (a remote one's blocks are fetched when asked)
                ds.scanner.start(stop, page)

    async def stopped(app: web.Application) -> None:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)

    app = web.Application(middlewares=[guard], client_max_size=1024)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", asset)
    app.router.add_get("/api/datasets", listing)
    app.router.add_get("/api/records", records)
    app.router.add_get("/api/record", record)
    app.router.add_get("/api/thumb", thumb)
    app.router.add_get("/api/payload", payload)
    app.router.add_get("/api/image", image)
    app.router.add_get("/api/scan", scan)
    app.router.add_get("/api/stats", stats)
    app.router.add_get("/api/augment", augment)
    app.router.add_get("/api/drawn", drawn_image)
    app.on_startup.append(started)
    app.on_cleanup.append(stopped)
    return app


def _refuse(status: int, why: str) -> web.Response:
    return web.json_response({"error": why}, status=status,
                             headers={"Content-Security-Policy": CSP})  # fmt: skip


def _number(request: web.Request, name: str, low: int, high: int, default: int) -> int:
    """A whole-number query parameter within ``[low, high]`` (400 otherwise)."""
    text = request.query.get(name)
    if text is None:
        return default
    if not (text.lstrip("-").isdigit() and len(text) <= 20):
        raise web.HTTPBadRequest(text=f"{name} must be a whole number")
    value = int(text)
    if not low <= value <= high:
        raise web.HTTPBadRequest(text=f"{name} must be from {low} to {high}")
    return value


def _selection(request: web.Request) -> Selection:
    """The grid's filter: ``class``, ``problem`` (broken or undecodable),
    ``side`` and ``aspect`` (``LOW-HIGH``)."""
    label = request.query.get("class")
    found = request.query.get("problem")
    if found not in (None, "broken", "undecodable"):
        raise web.HTTPBadRequest(text="problem must be broken or undecodable")
    return Selection(
        None if label is None else _number(request, "class", -1, 2**31, 0),
        found,
        _range(request, "side"),
        _range(request, "aspect"),
    )


def _range(request: web.Request, name: str) -> tuple[float, float] | None:
    """A ``LOW-HIGH`` query parameter of two finite numbers, low below high."""
    text = request.query.get(name)
    if text is None:
        return None
    low, _, high = text[:60].partition("-")
    try:
        pair = (float(low), float(high))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be LOW-HIGH, two numbers") from None
    if not (np.isfinite(pair).all() and 0 <= pair[0] < pair[1]):
        raise web.HTTPBadRequest(text=f"{name} must be LOW-HIGH with 0 <= LOW < HIGH")
    return pair


def _table(options: dict[str, tuple[type, float, float, float]]) -> dict[str, Any]:
    return {name: {"kind": kind.__name__, "low": low, "high": high, "default": default}
            for name, (kind, low, high, default) in options.items()}  # fmt: skip
