"""The repository's docs stand alone: every link in the README, `docs/` and the top-level notes leads to a file of
the repository (and, with an anchor, to a heading of it), or to a public page; none leads to the design notes the
docs were written from, which a reader of the repository does not have."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.proof_counts import record

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "SECURITY.md", *(REPO / "docs").glob("**/*.md")],
    key=lambda path: str(path),
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PRIVATE_HOSTS = re.compile(r"^(localhost|127\.|10\.|192\.168\.|169\.254\.|0\.0\.0\.0|\[::1\])|\.(local|internal)$")


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a document's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+\s+(.+?)\s*$", markdown, re.MULTILINE):
        text = re.sub(r"[`*_]", "", heading).lower()
        anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    # Code blocks show commands and JSON, not links
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return LINK.findall(text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_link_stays_in_the_repository_or_goes_to_a_public_page(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    # No reader has the design notes the docs were written from
    assert not re.search(r"shared/design|\.\./shared/", text), doc
    for target in _links(doc):
        parts = urlsplit(target)
        if parts.scheme:
            # A public page: https (or http), a host that is not a private address
            assert parts.scheme in ("https", "http"), target
            assert parts.hostname, target
            assert not PRIVATE_HOSTS.search(parts.hostname), target
            continue
        if not parts.path:  # an anchor in the same document
            assert parts.fragment in _anchors(text), target
            continue
        linked = (doc.parent / unquote(parts.path)).resolve()
        # Inside the repository, and there
        assert linked.is_relative_to(REPO), target
        assert linked.exists(), f"{doc.relative_to(REPO)} links {target}: no such file"
        if parts.fragment and linked.suffix == ".md":
            assert parts.fragment in _anchors(linked.read_text(encoding="utf-8")), target
    record("docs links", documents=1)
