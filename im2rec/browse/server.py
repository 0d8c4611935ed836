"""The ``rec browse`` server: aiohttp, read only. Every request must carry
the run's token (the ``token`` query parameter, or the cookie the page's
first load sets); its Host must be the address served (DNS rebinding) and
an Origin, when sent, this page's (cross-site requests); every answer has
a Content-Security-Policy that lets the page load only its own files. No
request names a file-system path: datasets and records are numbers.
Thumbnails are made in a pool of ``workers`` threads (Pillow decodes
without the GIL); a record that is not an image is an answer saying why,
never an error of the server."""

from __future__ import annotations

import asyncio
import hmac
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import web

from ..errors import Im2RecError
from ..imaging.codec import DECODE_ERRORS
from ..imaging.headers import image_extension
from .records import THUMB_SIDES, Browsed

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
        response: web.StreamResponse = await handler(request)
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
        return web.json_response([
            {"number": k, "name": d.name, "records": d.count,
             "classes": {str(c): n for c, n in sorted(d.classes.items())}}
            for k, d in enumerate(datasets)
        ])  # fmt: skip

    async def records(request: web.Request) -> web.StreamResponse:
        ds = dataset(request)
        start = _number(request, "start", 0, max(ds.count, 1), 0)
        count = _number(request, "count", 1, MAX_PAGE, 100)
        seed = request.query.get("seed")
        seed_value = _number(request, "seed", 0, 2**63 - 1, 0) if seed else None
        label = request.query.get("class")
        if label is not None:
            members = ds.members(_number(request, "class", -1, 2**31, 0))
            if members is None:
                return web.json_response({"total": None, "records": [], "pending": True})
            chosen = members[start : start + count].tolist()
            total = len(members)
        else:
            chosen = [
                ds.position(k, seed_value) for k in range(start, min(start + count, ds.count))
            ]
            total = ds.count
        loop = asyncio.get_running_loop()
        described = await loop.run_in_executor(pool, lambda: [ds.describe(i) for i in chosen])
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
        return web.json_response(ds.scan.to_dict(ds.classes))

    async def started(app: web.Application) -> None:
        for ds in datasets:
            threading.Thread(target=ds.run_scan, args=(stop,), daemon=True,
                             name="im2rec-browse-scan").start()  # fmt: skip

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
