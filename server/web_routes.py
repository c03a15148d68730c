"""HTTP routes the web page needs beside AHP: Markdown rendering and the icon.

`POST /render` turns the Markdown of replies into HTML the page may insert:
markdown-it-py renders it with raw HTML off (a `<script>` in a reply comes
out as text), and nh3 (the Rust ammonia sanitizer) then keeps only the tags,
attributes and URL schemes listed here, so no script, event handler or
`javascript:` link survives either step. The page sends the same bearer
token as on its WebSocket; a body is at most RENDER_BYTES of text and
RENDER_TEXTS texts. Rendering runs on a worker thread, off the event loop.

An image (`![alt](url)`) is rendered as a link to it, its text the alt
text (or the file's name): the page loads no image a reply names, since an
image from another origin tells that origin who read the reply and when
(the page's Content-Security-Policy would refuse it anyway). An image inside
a link is its alt text, in that link.

`/favicon.ico` answers with the page's SVG icon, so a browser that asks for
it finds one.
"""

import asyncio
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

import nh3
from aiohttp import web
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

RENDER_BYTES = 512 * 1024  # of text, all texts of one request together
RENDER_TEXTS = 200

TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
}  # fmt: skip
# no style attribute: the page's Content-Security-Policy refuses inline styles
ATTRIBUTES = {"a": {"href", "title", "class"}, "code": {"class"}}
URL_SCHEMES = {"http", "https", "mailto"}


def _image_as_link(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """An image as a link to it (see the module docstring)."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children, options, env).strip()
    label = escapeHtml(alt or src.rstrip("/").rsplit("/", 1)[-1] or "image")
    opened = sum(
        +1 if t.type == "link_open" else -1 for t in tokens[:idx] if t.type.startswith("link_")
    )
    if opened > 0:  # already inside a link: no link in a link
        return label
    said = str(token.attrGet("title") or ("" if src.startswith("data:") else src))
    title = escapeHtml(f"Image: {said}" if said else "Image")
    return f'<a class="image" href="{escapeHtml(src)}" title="{title}">{label}</a>'


_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_markdown.add_render_rule("image", _image_as_link)


@functools.lru_cache(maxsize=2048)
def render_markdown(text: str) -> str:
    """Sanitized HTML for one Markdown text. Links open in a new tab, without
    the page as their opener or referrer."""
    return nh3.clean(
        _markdown.render(text),
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )


def add_web_routes(app: web.Application, static_dir: str, tokens: Mapping[str, str]) -> None:
    """Register /render and /favicon.ico on the server's app."""
    icon = Path(static_dir) / "favicon.svg"

    async def favicon(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(icon, headers={"Content-Type": "image/svg+xml"})

    async def render(request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or header[7:] not in tokens:
            raise web.HTTPUnauthorized(
                text="a bearer token is required", headers={"WWW-Authenticate": "Bearer"}
            )
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="expected JSON: {texts: [...]}") from None
        texts = body.get("texts") if isinstance(body, dict) else None
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise web.HTTPBadRequest(text="expected JSON: {texts: [...]}")
        if len(texts) > RENDER_TEXTS or sum(len(t) for t in texts) > RENDER_BYTES:
            raise web.HTTPRequestEntityTooLarge(
                max_size=RENDER_BYTES, actual_size=sum(len(t) for t in texts)
            )
        html = await asyncio.to_thread(lambda: [render_markdown(t) for t in texts])
        return web.json_response({"html": html})

    app.router.add_get("/favicon.ico", favicon)
    app.router.add_post("/render", render)
