"""The README's code blocks, for the suites that run them as a reader would."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(section: str, after: str, language: str = r"\w+") -> tuple[str, str]:
    """The first fenced block (of `language`) in the README's `section` (a `## ` heading, up to the next one) after
    its first line containing `after`: the block's language and text. Fails when the section does not say `after`."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n{section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end >= 0 else len(text)]
    assert after in body, f"{section} does not say {after!r}"
    found = re.search(rf"```({language})\n(.*?)```", body[body.index(after) :], re.DOTALL)
    assert found, f"no {language} block after {after!r} in {section}"
    return found.group(1), found.group(2)
