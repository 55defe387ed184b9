"""Rebuild `functions/baton_checkpoints/store/state.zdict`, the zstd dictionary Baton compresses checkpoint states with.

Usage: `python -m bench.tools.train_dictionary` rewrites the file and prints its SHA-256 (the value pinned as
`DICTIONARY_SHA256` in `baton/store/codec.py`); `--check` rebuilds it in memory and exits 1 unless it equals the
shipped file byte for byte. About 8 s on a 2-core machine: 7 s to build the corpus (mostly parsing the standard
library's sources), 0.1 s to train.

What the dictionary learns from: agent-state-shaped canonical JSON (sorted keys, no spaces, UTF-8, as Baton
stores it) in the shapes agent frameworks write:

* OpenAI-style chat threads: `messages` of `role`/`content`, assistant `tool_calls` whose `function.arguments` is
  a JSON string, `tool` answers with `tool_call_id`;
* Anthropic-style threads: `content` blocks of `type` `text`, `tool_use` (`id`, `name`, `input`) and `tool_result`;
* LangGraph checkpoints: `channel_values`, `channel_versions`, `versions_seen`, and messages serialized both as
  LangChain constructors (`lc`, `kwargs`, `additional_kwargs`, `response_metadata`) and as `{type, data}`;
* task plans: `steps` with `status`, `tool`, `arguments`, `result`, `notes`, timestamps; agent memory and
  scratchpads.

Where the text comes from, and why it is disjoint from what the benchmark measures: the benchmark's states
(`bench/harness/states.py`) take every passage from `pydoc_data.topics`, the Python Language Reference shipped with the
interpreter, and draw them with small integer seeds. This corpus takes its prose from the docstrings of the
standard library's own modules, classes and functions, its code from the bodies of standard-library functions,
and a few lines from `this` (the Zen of Python), all read with `ast` from the interpreter's `Lib/` (the `test`
packages, `site-packages` and `pydoc_data` itself are skipped). Docstrings are written apart from the reference
manual, but a few quote it; so any passage sharing a 48-character run of text (whitespace folded) with
`pydoc_data.topics` is dropped, and the count dropped is printed. Tool names, model names, file paths and URLs
are this script's own, none of the benchmark's; its generator is seeded with a string, not the benchmark's
integers. What the two share is what every agent state shares, the key names the frameworks use, and what
this corpus and the benchmark share besides: English about programming. Agents that talk about anything else
gain less from the dictionary than the benchmark shows; `bench/studies/codec_study.py` measures how much less on text
neither has seen.

The corpus deals every docstring paragraph once (305 states, 2 MB): a passage dealt many times would look
frequent to fastCover and take the dictionary's room from what states really have in common.

Byte-for-byte rebuilds depend on the inputs: the interpreter's standard library (CPython 3.11.7), the `zstandard`
wheel (0.25.0, bundling libzstd 1.5.7), and this script. Training runs fastCover single-threaded with fixed `k`,
`d` and dictionary id, so it is deterministic (checked under different `PYTHONHASHSEED`s); the script refuses
other versions rather than quietly writing a different dictionary (a different dictionary needs a new codec byte,
see `baton/store/codec.py`).
"""

from __future__ import annotations

import argparse
import ast
import codecs
import contextlib
import hashlib
import io
import json
import random
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, cast

from bench.paths import REPO

OUTPUT = REPO / "functions" / "baton_checkpoints" / "store" / "state.zdict"
PYTHON = (3, 11, 7)
ZSTANDARD = "0.25.0"

DICT_SIZE = 262_144
DICT_ID = 0x4241_5401
"""`BAT` and the dictionary's number, 1: inside the range zstd leaves to applications (32768 to 2**31 - 1)."""
TRAIN_K = 256
"""fastCover segment size: how long the stretches of sample text the dictionary keeps are."""
TRAIN_D = 8
"""fastCover dmer size: the length of the repeated strings it counts."""
TRAIN_LEVEL = 6
"""The level the dictionary's entropy tables are tuned for (the codec's level)."""
SEED = "baton-state-dictionary-1"
OVERLAP_WINDOW = 48
"""A training passage sharing this many consecutive characters (whitespace folded) with the benchmark's text
is dropped."""
MIN_PASSAGE_CHARS = 40

MODELS = ("gpt-4o", "gpt-4o-mini", "o3-mini", "claude-3-5-haiku-latest", "claude-3-7-sonnet", "gemini-2.0-flash")
TOOLS = (
    "web_search",
    "fetch_url",
    "open_file",
    "edit_file",
    "list_directory",
    "execute_code",
    "run_shell",
    "sql_query",
    "send_email",
    "create_ticket",
    "calculator",
    "get_weather",
)
PATHS = ("app/main.py", "lib/utils.py", "README.md", "setup.cfg", "service/handlers.py", "tests/test_api.py")
HOSTS = ("https://example.com", "https://api.example.org", "https://en.wikipedia.org/wiki", "https://github.com")
STATUSES = ("done", "in_progress", "pending", "failed", "skipped")
STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence")
FINISH_REASONS = ("stop", "tool_calls", "length")


def _fold(text: str) -> str:
    """Whitespace runs become one space: the overlap test ignores how text was wrapped."""
    return " ".join(text.split())


def _windows(text: str) -> Iterator[str]:
    """Every `OVERLAP_WINDOW`-character run of `text`, stepping one character."""
    for start in range(len(text) - OVERLAP_WINDOW + 1):
        yield text[start : start + OVERLAP_WINDOW]


@cache
def _benchmark_windows() -> frozenset[str]:
    """Every window of the benchmark's source text (the Python Language Reference topics): about 45 MB."""
    from pydoc_data.topics import topics

    return frozenset(window for name in sorted(topics) for window in _windows(_fold(topics[name])))


def _disjoint(text: str) -> bool:
    """True when `text` shares no window with the benchmark's text."""
    known = _benchmark_windows()
    return known.isdisjoint(_windows(_fold(text)))


@cache
def _stdlib_text() -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """Prose (docstring paragraphs) and code (short function bodies) of the standard library, and how many
    passages were dropped for overlapping the benchmark's text."""
    root = Path(sysconfig.get_paths()["stdlib"])
    prose: list[str] = []
    code: list[str] = []
    dropped = 0
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] in ("site-packages", "pydoc_data") or any(p in ("test", "tests", "idle_test") for p in parts):
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:  # lib2to3's test data holds Python 2 on purpose
            continue
        lines = source.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            docstring = ast.get_docstring(node)
            for paragraph in (docstring or "").split("\n\n"):
                paragraph = paragraph.strip()
                if len(paragraph) < MIN_PASSAGE_CHARS:
                    continue
                if _disjoint(paragraph):
                    prose.append(paragraph)
                else:
                    dropped += 1
            if isinstance(node, ast.FunctionDef) and node.end_lineno and 3 <= node.end_lineno - node.lineno <= 25:
                # Whole lines of the function, decorators left out (ast.get_source_segment re-splits the file).
                segment = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                if segment.isascii():
                    if _disjoint(segment):
                        code.append(segment)
                    else:
                        dropped += 1
    with contextlib.redirect_stdout(io.StringIO()):
        import this  # prints the Zen on import

    prose.extend(line for line in codecs.decode(this.s, "rot13").splitlines() if len(line) > 20 and _disjoint(line))
    return tuple(prose), tuple(code), dropped


class _Writer:
    """Draws text, identifiers and shapes from one string-seeded generator.

    Text is drawn without replacement: prose and code are dealt in a shuffled order of runs of consecutive
    passages (a run stays on one module's topic), so a passage recurs in the corpus only when it recurs in the
    standard library. Dealing one passage many times would make fastCover mistake it for a frequent phrase and
    fill the dictionary with particular docstrings rather than what agent states have in common.
    """

    RUN = 6

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        prose, code, _ = _stdlib_text()
        self.prose = self._deal(prose)
        self.code = self._deal(code)
        self.prose_at = 0
        self.code_at = 0

    def _deal(self, passages: tuple[str, ...]) -> list[str]:
        runs = [passages[start : start + self.RUN] for start in range(0, len(passages), self.RUN)]
        self.rng.shuffle(runs)
        return [passage for run in runs for passage in run]

    @property
    def prose_dealt(self) -> bool:
        """True once every prose passage has been used."""
        return self.prose_at >= len(self.prose)

    def passage(self, min_chars: int, max_chars: int) -> str:
        """The next passages of prose, cut at a word near a random length between the two."""
        want = self.rng.randint(min_chars, max_chars)
        parts: list[str] = []
        size = 0
        while size < want:
            parts.append(self.prose[self.prose_at % len(self.prose)])
            size += len(parts[-1]) + 2
            self.prose_at += 1
        text = "\n\n".join(parts)
        cut = text.rfind(" ", 0, want)
        return text[: cut if cut > min_chars // 2 else want]

    def words(self, low: int, high: int) -> str:
        """A few words of prose (a title, a query, a note)."""
        words = self.rng.choice(self.prose).split()
        count = min(len(words), self.rng.randint(low, high))
        start = self.rng.randrange(len(words) - count + 1)
        return " ".join(words[start : start + count]).strip(".,;:()\"'`")

    def snippet(self) -> str:
        """The next function of the standard library, dedented: the code an agent reads or runs."""
        lines = self.code[self.code_at % len(self.code)].splitlines()
        self.code_at += 1
        indent = min((len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()), default=0)
        return "\n".join([lines[0], *(line[indent:] for line in lines[1:])])

    def hex_id(self, prefix: str, digits: int = 24) -> str:
        return f"{prefix}{self.rng.getrandbits(digits * 4):0{digits}x}"

    def uuid(self) -> str:
        raw = f"{self.rng.getrandbits(128):032x}"
        return f"{raw[:8]}-{raw[8:12]}-4{raw[13:16]}-a{raw[17:20]}-{raw[20:]}"

    def timestamp(self) -> str:
        day = self.rng.randint(1, 28)
        seconds = self.rng.randrange(86_400)
        return (
            f"2025-{self.rng.randint(1, 12):02}-{day:02}T{seconds // 3600:02}:{seconds // 60 % 60:02}:{seconds % 60:02}"
        )

    def timestamp_z(self) -> str:
        return f"{self.timestamp()}.{self.rng.randrange(1000):03}Z"

    def arguments(self, tool: str) -> dict[str, Any]:
        """JSON arguments shaped like the tool's."""
        rng = self.rng
        if tool == "web_search":
            return {"query": self.words(2, 8), "num_results": rng.choice((3, 5, 8))}
        if tool == "fetch_url":
            return {"url": f"{rng.choice(HOSTS)}/{self.words(1, 3).lower().replace(' ', '_')}", "timeout": 20}
        if tool in ("open_file", "edit_file"):
            found: dict[str, Any] = {"path": rng.choice(PATHS)}
            if tool == "edit_file":
                found |= {"old_str": self.snippet()[:120], "new_str": self.snippet()[:160]}
            return found
        if tool == "list_directory":
            return {"path": rng.choice(("app", "lib", ".", "service")), "recursive": rng.random() < 0.3}
        if tool == "execute_code":
            return {"language": "python", "code": self.snippet()}
        if tool == "run_shell":
            return {"command": rng.choice(("pytest -q", "git status", "ls -la", "pip list", "make lint"))}
        if tool == "sql_query":
            return {"query": f"SELECT id, name FROM {self.words(1, 1).lower()} LIMIT {rng.randint(5, 50)}"}
        if tool == "send_email":
            return {"to": ["team@example.com"], "subject": self.words(3, 8), "body": self.passage(80, 500)}
        if tool == "create_ticket":
            return {"title": self.words(4, 9), "description": self.passage(60, 400), "priority": "medium"}
        if tool == "calculator":
            return {"expression": f"{rng.randint(2, 999)} * {rng.randint(2, 99)} + {rng.randint(1, 9)}"}
        return {"location": rng.choice(("Paris", "Lisbon", "Osaka", "Denver")), "unit": "celsius"}

    def answer(self) -> str:
        """What a tool sends back: prose or code."""
        return self.snippet() if self.rng.random() < 0.3 else self.passage(100, 1400)


def _openai_thread(w: _Writer, budget: int) -> dict[str, Any]:
    rng = w.rng
    messages: list[dict[str, Any]] = [{"role": "system", "content": w.passage(80, 500)}]
    size = 0
    while size < budget:
        first = len(messages)
        messages.append({"role": "user", "content": w.passage(30, 700)})
        if rng.random() < 0.5:
            call_id = w.hex_id("call_")
            tool = rng.choice(TOOLS)
            arguments = json.dumps(w.arguments(tool))
            messages.append(
                {
                    "role": "assistant",
                    "content": None if rng.random() < 0.6 else w.passage(30, 200),
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": w.answer()})
        messages.append({"role": "assistant", "content": w.passage(80, 1200)})
        size += sum(len(json.dumps(m)) for m in messages[first:])
    state: dict[str, Any] = {"messages": messages, "model": rng.choice(MODELS)}
    if rng.random() < 0.5:
        state |= {"thread_id": w.uuid(), "created_at": w.timestamp_z()}
    if rng.random() < 0.3:
        state["usage"] = {"prompt_tokens": rng.randint(50, 9000), "completion_tokens": rng.randint(5, 900)}
    if rng.random() < 0.3:
        state["finish_reason"] = rng.choice(FINISH_REASONS)
    return state


def _anthropic_thread(w: _Writer, budget: int) -> dict[str, Any]:
    rng = w.rng
    messages: list[dict[str, Any]] = []
    size = 0
    while size < budget:
        first = len(messages)
        messages.append({"role": "user", "content": [{"type": "text", "text": w.passage(30, 700)}]})
        if rng.random() < 0.5:
            tool_id = w.hex_id("toolu_", 24)
            tool = rng.choice(TOOLS)
            blocks: list[dict[str, Any]] = []
            if rng.random() < 0.5:
                blocks.append({"type": "text", "text": w.passage(30, 200)})
            blocks.append({"type": "tool_use", "id": tool_id, "name": tool, "input": w.arguments(tool)})
            messages.append({"role": "assistant", "content": blocks})
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": w.answer()}
            if rng.random() < 0.1:
                result["is_error"] = True
            messages.append({"role": "user", "content": [result]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": w.passage(80, 1200)}]})
        size += sum(len(json.dumps(m)) for m in messages[first:])
    state: dict[str, Any] = {"messages": messages, "model": rng.choice(MODELS), "system": w.passage(80, 400)}
    if rng.random() < 0.5:
        state |= {"stop_reason": rng.choice(STOP_REASONS), "max_tokens": rng.choice((1024, 4096, 8192))}
    return state


def _langchain_message(w: _Writer, kind: str, content: str, constructor: bool) -> dict[str, Any]:
    classes = {"human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage", "system": "SystemMessage"}
    data: dict[str, Any] = {
        "content": content,
        "type": kind,
        "id": w.uuid() if kind != "ai" else f"run-{w.uuid()}-0",
        "additional_kwargs": {},
        "response_metadata": {},
        "name": None,
    }
    if kind == "ai":
        data |= {"tool_calls": [], "invalid_tool_calls": [], "usage_metadata": None}
        data["response_metadata"] = {"finish_reason": w.rng.choice(FINISH_REASONS), "model_name": w.rng.choice(MODELS)}
    if constructor:
        return {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", classes[kind]],
            "kwargs": data,
        }
    return {"type": kind, "data": data}


def _langgraph_checkpoint(w: _Writer, budget: int) -> dict[str, Any]:
    rng = w.rng
    constructor = rng.random() < 0.5
    messages: list[dict[str, Any]] = []
    size = 0
    while size < budget:
        first = len(messages)
        messages.append(_langchain_message(w, "human", w.passage(30, 600), constructor))
        ai = _langchain_message(w, "ai", "" if rng.random() < 0.5 else w.passage(60, 1000), constructor)
        body = ai["kwargs" if constructor else "data"]
        if rng.random() < 0.5:
            tool = rng.choice(TOOLS)
            call = {"name": tool, "args": w.arguments(tool), "id": w.hex_id("call_"), "type": "tool_call"}
            body["tool_calls"] = [call]
            messages.append(ai)
            tool_message = _langchain_message(w, "tool", w.answer(), constructor)
            tool_body = tool_message["kwargs" if constructor else "data"]
            tool_body |= {"tool_call_id": call["id"], "name": tool, "status": "success"}
            messages.append(tool_message)
            messages.append(_langchain_message(w, "ai", w.passage(60, 1000), constructor))
        else:
            messages.append(ai)
        size += sum(len(json.dumps(m)) for m in messages[first:])
    step = rng.randint(1, 40)
    versions = {name: f"{step:032}.0.{rng.random()}" for name in ("__start__", "messages", "agent", "tools")}
    return {
        "v": 1,
        "id": w.uuid(),
        "ts": f"{w.timestamp()}.{rng.randrange(1_000_000):06}+00:00",
        "channel_values": {"messages": messages, "remaining_steps": rng.randint(1, 25)},
        "channel_versions": versions,
        "versions_seen": {"__input__": {}, "agent": {"messages": versions["messages"]}},
        "pending_sends": [],
    }


def _task_plan(w: _Writer, budget: int) -> dict[str, Any]:
    rng = w.rng
    steps: list[dict[str, Any]] = []
    state: dict[str, Any] = {
        "task_id": w.hex_id("task_", 16),
        "goal": w.passage(60, 400),
        "steps": steps,
        "status": "in_progress",
        "created_at": w.timestamp_z(),
    }
    if rng.random() < 0.5:
        state["context"] = {"files": rng.sample(PATHS, 2), "notes": [w.words(4, 12) for _ in range(rng.randint(1, 4))]}
    size = 0
    finished = rng.random() * 0.8
    while size < budget:
        tool = rng.choice(TOOLS)
        status = "done" if size < budget * finished else rng.choice(STATUSES)
        step: dict[str, Any] = {
            "id": len(steps) + 1,
            "title": w.words(3, 9),
            "status": status,
            "tool": tool,
            "arguments": w.arguments(tool),
        }
        if status in ("done", "failed"):
            step |= {"result": w.answer(), "started_at": w.timestamp_z(), "finished_at": w.timestamp_z()}
            if status == "failed":
                step["error"] = w.words(4, 12)
        if rng.random() < 0.4:
            step["notes"] = [w.words(4, 12) for _ in range(rng.randint(1, 3))]
        steps.append(step)
        size += len(json.dumps(step))
    return state


def _memory(w: _Writer, budget: int) -> dict[str, Any]:
    rng = w.rng
    facts: list[dict[str, Any]] = []
    state: dict[str, Any] = {
        "user_id": w.hex_id("user_", 12),
        "memory": {"facts": facts, "preferences": {"language": "en", "tone": rng.choice(("concise", "detailed"))}},
        "scratchpad": w.passage(60, 600),
        "todo": [{"text": w.words(3, 8), "done": rng.random() < 0.5} for _ in range(rng.randint(0, 6))],
        "updated_at": w.timestamp_z(),
    }
    size = 0
    while size < budget:
        facts.append({"key": w.words(1, 3).lower(), "value": w.passage(30, 300), "source": rng.choice(TOOLS)})
        size += len(json.dumps(facts[-1]))
    return state


SHAPES: tuple[tuple[Callable[[_Writer, int], dict[str, Any]], int], ...] = (
    (_openai_thread, 4),
    (_anthropic_thread, 2),
    (_langgraph_checkpoint, 2),
    (_task_plan, 3),
    (_memory, 1),
)
"""Each shape and its weight in the corpus."""


def _budget(rng: random.Random) -> int:
    """Text bytes of one sample: mostly small states (the ones a dictionary helps most), some large."""
    band = rng.random()
    if band < 0.45:
        return rng.randint(100, 2_000)
    if band < 0.8:
        return rng.randint(2_000, 8_000)
    return rng.randint(8_000, 24_000)


def training_samples(seed: str = SEED) -> list[bytes]:
    """The corpus: agent states in canonical JSON (sorted keys, compact, UTF-8), until every docstring paragraph
    has been used once."""
    from baton_checkpoints.domain.canonical import canonical_json

    rng = random.Random(seed)
    writer = _Writer(rng)
    shapes = [shape for shape, weight in SHAPES for _ in range(weight)]
    samples: list[bytes] = []
    while not writer.prose_dealt:
        samples.append(canonical_json(rng.choice(shapes)(writer, _budget(rng))))
    return samples


def build(dict_size: int = DICT_SIZE, samples: list[bytes] | None = None) -> bytes:
    """The dictionary's bytes (zstd format: magic, id, entropy tables, content)."""
    import zstandard

    corpus = samples if samples is not None else training_samples()
    trained = zstandard.train_dictionary(
        dict_size,
        cast("list[bytes | bytearray | memoryview[int]]", corpus),  # a list of bytes (lists are invariant)
        k=TRAIN_K,
        d=TRAIN_D,
        dict_id=DICT_ID,
        level=TRAIN_LEVEL,
        split_point=0.75,  # fastCover scores its candidate on the last quarter of the samples (its default)
        steps=1,  # with k and d fixed: one training, no search
        threads=0,  # one thread: the same dictionary every time
    )
    return trained.as_bytes()


def _check_versions() -> None:
    import zstandard

    if sys.version_info[:3] != PYTHON or zstandard.__version__ != ZSTANDARD:
        found = f"CPython {sys.version.split()[0]}, zstandard {zstandard.__version__}"
        wanted = f"CPython {'.'.join(map(str, PYTHON))}, zstandard {ZSTANDARD}"
        raise SystemExit(f"the shipped dictionary was built with {wanted}; this is {found}: not rebuilding")


def main() -> None:
    """Rebuild the dictionary (or check the shipped one) and print what it was built from."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 unless a rebuild equals the shipped file")
    args = parser.parse_args()
    _check_versions()
    started = time.perf_counter()
    samples = training_samples()
    prose, code, dropped = _stdlib_text()
    corpus_at = time.perf_counter()
    data = build(DICT_SIZE, samples)
    finished = time.perf_counter()
    digest = hashlib.sha256(data).hexdigest()
    print(f"text: {len(prose)} docstring paragraphs, {len(code)} functions; {dropped} dropped for overlapping")
    print(f"corpus: {len(samples)} samples, {sum(map(len, samples)):,} bytes, built in {corpus_at - started:.1f} s")
    print(f"dictionary: {len(data):,} bytes, trained in {finished - corpus_at:.1f} s, sha256 {digest}")
    if args.check:
        shipped = OUTPUT.read_bytes()
        if shipped != data:
            print(f"{OUTPUT} differs from the rebuild (sha256 {hashlib.sha256(shipped).hexdigest()})")
            raise SystemExit(1)
        print(f"{OUTPUT} is identical")
        return
    OUTPUT.write_bytes(data)
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
