"""Seeded, realistic agent states for the benchmark, built from real text.

Random bytes do not compress and lorem ipsum compresses far too well, so both would lie about Baton's storage
figures. The text here comes from the Python documentation shipped with the interpreter (`pydoc_data.topics`):
prose, grammar snippets and code examples, much like what an agent reads and writes. Identifiers (call ids,
thread ids) are random hex, as they are in real states, and do not compress.

Two shapes:

* `conversation_state`: a chat thread of alternating user/assistant turns; some assistant turns call a tool
  (OpenAI-style `tool_calls` whose `arguments` is a JSON string) and are followed by the tool's answer.
* `task_state`: a plan with a list of steps (done, one in progress, then pending), each with JSON arguments,
  results and notes.

Both are deterministic for a given `(target_bytes, seed)` and, from a couple of kilobytes up, land within a few
bytes under `target_bytes` of canonical JSON (sorted keys, no spaces, UTF-8: what RFC 8785 produces for the
strings and integers used here).

Run `python -m bench.harness.states` to print the sizes and compression ratios of a few states.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import cache
from pydoc_data.topics import topics
from typing import Any

MODELS = ("gpt-4.1-mini", "claude-sonnet-4", "llama-3.3-70b-instruct", "mistral-large")
FILE_PATHS = (
    "src/app/models.py",
    "src/app/views.py",
    "docs/reference.rst",
    "tests/test_parser.py",
    "pyproject.toml",
    "scripts/migrate.py",
)
# Share of a task's step bytes that are finished work (done steps carry results, pending ones only a title).
DONE_SHARE = 0.7
# Text fill never cuts a passage shorter than this: a 3-character message is not realistic.
MIN_FILL_CHARS = 40


def canonical_size(value: Any) -> int:
    """Bytes of `value` in canonical JSON (equal to RFC 8785 for the strings, integers and lists used here)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8"))


@cache
def _paragraphs() -> tuple[str, ...]:
    """Every paragraph of the shipped documentation, in a fixed order (topics sorted by name)."""
    found: list[str] = []
    for name in sorted(topics):
        for block in topics[name].split("\n\n"):
            block = block.strip("\n")
            # Underlines of headings ("*****") and one-word lines carry no text worth storing.
            if len(block) >= MIN_FILL_CHARS and not set(block.strip()) <= set("*=-~^ \n"):
                found.append(block)
    return tuple(found)


class _Text:
    """Draws passages and phrases from the documentation with one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.paragraphs = _paragraphs()

    def passage(self, min_chars: int, max_chars: int) -> str:
        """Consecutive paragraphs from a random place, cut at a word boundary between the two lengths."""
        want = self.rng.randint(min_chars, max_chars)
        start = self.rng.randrange(len(self.paragraphs))
        parts: list[str] = []
        size = 0
        index = start
        while size < want:
            paragraph = self.paragraphs[index % len(self.paragraphs)]
            parts.append(paragraph)
            size += len(paragraph) + 2
            index += 1
        text = "\n\n".join(parts)
        if len(text) > want:
            cut = text.rfind(" ", 0, want)
            text = text[: cut if cut >= min_chars else want]
        return text

    def phrase(self, min_words: int, max_words: int) -> str:
        """A few consecutive words of prose (a title, a query)."""
        words = self.rng.choice(self.paragraphs).split()
        count = min(len(words), self.rng.randint(min_words, max_words))
        start = self.rng.randrange(len(words) - count + 1)
        return " ".join(words[start : start + count]).strip(".,;:()\"'")

    def code(self) -> str:
        """An indented example from the documentation (the code an agent would run), else a passage."""
        for _ in range(20):
            paragraph = self.rng.choice(self.paragraphs)
            if paragraph.startswith("   ") and "=" in paragraph:
                return "\n".join(line[3:] for line in paragraph.splitlines())
        return self.passage(80, 300)

    def hex_id(self, prefix: str, digits: int = 24) -> str:
        """A random identifier, as real states carry (these do not compress)."""
        return f"{prefix}{self.rng.getrandbits(digits * 4):0{digits}x}"


def _tool_call(text: _Text) -> tuple[str, dict[str, Any]]:
    """A tool name and its JSON arguments, shaped like what agents really send."""
    rng = text.rng
    choice = rng.randrange(5)
    if choice == 0:
        return "search_docs", {"query": text.phrase(3, 8), "max_results": rng.choice((3, 5, 10)), "lang": "en"}
    if choice == 1:
        start = rng.randint(1, 400)
        return "read_file", {"path": rng.choice(FILE_PATHS), "start_line": start, "end_line": start + 60}
    if choice == 2:
        return "run_python", {"code": text.code(), "timeout_s": rng.choice((5, 10, 30))}
    if choice == 3:
        return "http_get", {
            "url": f"https://docs.python.org/3/reference/{text.phrase(1, 2).lower().replace(' ', '-')}.html",
            "headers": {"accept": "text/html"},
        }
    return "write_note", {"title": text.phrase(3, 7), "body": text.passage(80, 400), "tags": ["research", "python"]}


def _fill(
    state: dict[str, Any],
    items: list[Any],
    target_bytes: int,
    text: _Text,
    make: Callable[[], list[Any]],
    last: Callable[[str], Any],
) -> dict[str, Any]:
    """Append groups from `make()` to `items` while they fit, then one `last(text)` item cut to fill the rest.

    Sizes are tracked incrementally (an element costs its own size plus a comma) so that large states do not
    re-serialize the whole list at each step.
    """
    size = canonical_size(state)
    while True:
        group = make()
        added = sum(canonical_size(item) for item in group) + len(group) - (0 if items else 1)
        if size + added > target_bytes:
            break
        items.extend(group)
        size += added
    room = target_bytes - size - (1 if items else 0)
    if room > MIN_FILL_CHARS * 2:
        source = text.passage(room, room)
        chars = room
        # Shorten the text by what the item overflows until it fits (field names and escapes cost bytes too).
        while chars >= MIN_FILL_CHARS:
            item = last(source[:chars])
            overflow = canonical_size(item) - room
            if overflow <= 0:
                items.append(item)
                break
            chars -= overflow
    return state


def conversation_state(target_bytes: int = 32_000, seed: int = 7) -> dict[str, Any]:
    """A chat thread of about `target_bytes` of canonical JSON: user/assistant turns, tool calls and results."""
    rng = random.Random(seed)
    text = _Text(rng)
    messages: list[dict[str, Any]] = []
    state: dict[str, Any] = {
        "thread_id": text.hex_id("thr_"),
        "model": rng.choice(MODELS),
        "temperature_pct": rng.choice((0, 20, 70)),
        "system": "You are a careful assistant for Python developers. " + text.passage(120, 400),
        "messages": messages,
    }

    def turn() -> list[Any]:
        group: list[Any] = [{"role": "user", "content": text.passage(60, 600)}]
        if rng.random() < 0.45:
            call_id = text.hex_id("call_")
            name, arguments = _tool_call(text)
            function = {"name": name, "arguments": json.dumps(arguments)}
            group.append(
                {
                    "role": "assistant",
                    "content": "" if rng.random() < 0.5 else text.passage(40, 160),
                    "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                }
            )
            group.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": text.passage(200, 1500)})
        group.append({"role": "assistant", "content": text.passage(120, 1200)})
        return group

    def last(content: str) -> dict[str, Any]:
        # Every turn group ends with the assistant, so the thread ends with the user's next message.
        return {"role": "user", "content": content}

    return _fill(state, messages, target_bytes, text, turn, last)


def task_state(target_bytes: int = 16_000, seed: int = 7) -> dict[str, Any]:
    """A task of about `target_bytes` of canonical JSON: a goal, context, and a list of steps."""
    rng = random.Random(seed)
    text = _Text(rng)
    steps: list[dict[str, Any]] = []
    state: dict[str, Any] = {
        "task_id": text.hex_id("task_"),
        "goal": text.passage(120, 500),
        "context": {"files": rng.sample(FILE_PATHS, 3), "facts": [text.passage(60, 200) for _ in range(3)]},
        "attempt": rng.randint(1, 3),
        "steps": steps,
    }
    current = "done"
    done_bytes = 0

    def step() -> list[Any]:
        nonlocal current, done_bytes
        # done for the first DONE_SHARE of the bytes, then one in_progress, then pending: the shape of a real plan.
        if current == "in_progress":
            current = "pending"
        elif current == "done" and done_bytes >= target_bytes * DONE_SHARE:
            current = "in_progress"
        name, arguments = _tool_call(text)
        entry: dict[str, Any] = {
            "id": len(steps) + 1,
            "title": text.phrase(3, 9),
            "status": current,
            "tool": name,
            "arguments": arguments,
        }
        if current == "done":
            entry["result"] = text.passage(100, 900)
            entry["notes"] = [text.phrase(4, 12) for _ in range(rng.randint(0, 3))]
            done_bytes += canonical_size(entry)
        return [entry]

    def last(description: str) -> dict[str, Any]:
        return {"id": len(steps) + 1, "title": "Next", "status": "pending", "description": description}

    return _fill(state, steps, target_bytes, text, step, last)


def main() -> None:
    """Print the size of a few states and how well a generic compressor (zlib 6) packs them (a quick look at what
    the benchmark stores; Baton's own codec is studied by `bench/studies/codec_study.py`)."""
    import zlib

    for name, make in (("conversation", conversation_state), ("task", task_state)):
        for target in (1_000, 4_000, 32_000, 256_000):
            state = make(target, 7)
            raw = json.dumps(state, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
            packed = len(zlib.compress(raw, 6))
            print(f"{name:12} target {target:7}  canonical {len(raw):7}  zlib {packed:7}  {packed / len(raw):.2f}")


if __name__ == "__main__":
    main()
