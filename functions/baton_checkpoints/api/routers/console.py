"""The console: a page for people, served by the api function itself at `/console`, that does everything through
the public API with the key its user signs in with (docs/console.md).

Its files ship in the package (`baton/console/`): no build, nothing fetched at deploy time, nothing loaded from
another origin. They are read by the first request that asks for them, never at import, so the console adds nothing
to the cold start of a request that is not for it. Every answer carries a strict Content-Security-Policy: scripts
and styles only from this origin, no inline script, no framing, requests only to this origin.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Final

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header, Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from msgspec import Struct

from baton_checkpoints.api.openapi import responses
from baton_checkpoints.api.resolver import PUBLIC
from baton_checkpoints.domain.errors import NotFound

router = Router()

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""Only this origin's files run; nothing inline (no `unsafe-inline`, no `eval`); the page fetches only this
origin (the API); no page may frame it; no form posts anywhere (the console's forms are handled by its script)."""

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    # Revalidated on every load (the ETag makes that a 304): a new deployment is never half-cached.
    "Cache-Control": "no-cache",
}

MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
"""The media type of each kind of file the console ships; a file of any other kind is not served."""

INDEX: Final = "index.html"


class Asset(Struct, frozen=True):
    """One file of the console, as served."""

    body: str
    media_type: str
    etag: str


@cache
def assets() -> dict[str, Asset]:
    """Every file of the console, by name, read from the package at the first request that asks for one."""
    import hashlib  # here, not at import: a container that never serves the console never pays for it
    from importlib import resources

    found: dict[str, Asset] = {}
    for entry in resources.files("baton_checkpoints").joinpath("console").iterdir():
        media_type = MEDIA_TYPES.get("." + entry.name.rpartition(".")[2])
        if media_type is None or not entry.is_file():
            continue
        raw = entry.read_bytes()
        found[entry.name] = Asset(raw.decode("utf-8"), media_type, f'"{hashlib.sha256(raw).hexdigest()[:32]}"')
    return found


def _serve(name: str, if_none_match: str | None) -> Response[str]:
    asset = assets().get(name)
    if asset is None:
        raise NotFound()
    headers = {**SECURITY_HEADERS, "ETag": asset.etag}
    if if_none_match is not None and asset.etag in {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}:
        return Response(status_code=304, content_type=None, body="", headers=headers)
    return Response(status_code=200, content_type=asset.media_type, body=asset.body, headers=headers)


def _file_responses(media_types: list[str], what: str) -> dict[int, OpenAPIResponse]:
    headers: dict[str, Any] = {
        "Content-Security-Policy": {"description": "Always sent.", "schema": {"type": "string"}},
        "ETag": {"description": "Always sent.", "schema": {"type": "string"}},
    }
    documented: dict[int, OpenAPIResponse] = {
        200: {
            "description": what,
            # Keyed by the media type alone: the charset parameter is the answer's detail, not another type.
            "content": {t.partition(";")[0]: {"schema": {"type": "string"}} for t in media_types},
            "headers": headers,
        },
        # An empty content map: no body (powertools would otherwise describe one).
        304: {
            "description": "Not modified: the file is the one If-None-Match names",
            "content": {},
            "headers": headers,
        },
    }
    return documented


IfNoneMatch = Annotated[
    str | None,
    Header(alias="If-None-Match", description="Entity tags, comma-separated: a current one answers 304, no body."),
]


@router.get(
    "/console",
    summary="The console",
    description=(
        "The console's page: sign in with an API key (kept in the tab's sessionStorage only) and see and manage "
        "checkpoints, history, leases, resume, LangGraph threads and keys through this API. Answers without a key; "
        "the page holds no data."
    ),
    openapi_extensions=PUBLIC,
    responses=_file_responses([MEDIA_TYPES[".html"]], "The console's page"),
    tags=["console"],
)
def console_page(if_none_match: IfNoneMatch = None) -> Response[str]:
    """The console's page."""
    return _serve(INDEX, if_none_match)


@router.get(
    "/console/",
    summary="The console, with a trailing slash",
    description="A permanent redirect to /console, where the page's relative links mean one thing.",
    openapi_extensions=PUBLIC,
    responses={
        308: {
            "description": "Go to /console",
            "content": {},
            "headers": {"Location": {"description": "Always /console.", "schema": {"type": "string"}}},
        }
    },
    tags=["console"],
)
def console_slash() -> Response[str]:
    """Where a person typing the address with a slash belongs."""
    return Response(status_code=308, content_type=None, body="", headers={**SECURITY_HEADERS, "Location": "/console"})


@router.get(
    "/",
    summary="The API's address",
    description=(
        "Where a browser opening the API's address is sent: the console (302 to /console). Clients find the "
        "routes at /v1/openapi.json."
    ),
    openapi_extensions=PUBLIC,
    responses={
        302: {
            "description": "Go to the console",
            "content": {},
            "headers": {"Location": {"description": "Always /console.", "schema": {"type": "string"}}},
        }
    },
    tags=["console"],
)
def root() -> Response[str]:
    """A person who opens the API's address in a browser finds the console (a temporary redirect: the address may
    one day answer something of its own)."""
    return Response(status_code=302, content_type=None, body="", headers={**SECURITY_HEADERS, "Location": "/console"})


@router.get(
    "/console/<asset>",
    summary="A file of the console",
    description="A script, style sheet or image of the console; any other name answers 404.",
    openapi_extensions=PUBLIC,
    responses={
        **_file_responses([t for name, t in MEDIA_TYPES.items() if name != ".html"], "The file"),
        **responses({}, (404,), described={404: "NOT_FOUND: the console has no file of this name"}),
    },
    tags=["console"],
)
def console_asset(
    asset: Annotated[str, Path(description="The file's name.")], if_none_match: IfNoneMatch = None
) -> Response[str]:
    """One file of the console."""
    if asset == INDEX:
        raise NotFound()  # the page lives at /console only, so that its relative links mean one thing
    return _serve(asset, if_none_match)
