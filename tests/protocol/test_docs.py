"""The repository's documents stand on their own: their frame examples are real frames, their links
lead somewhere inside the repository, and nothing points outside it."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import unicodedata
from pathlib import Path

import jsonpatch
import jsonschema
import pytest

from shared.core.conductor import KNOWN_CAPABILITIES
from shared.core.speakable import Card
from shared.wire.protocol import KINDS, SENTENCE_SPEECH, ErrorCode, Event, json_schema, parse_event
from shared.wire.schema_export import DEFAULT_PATH
from voiceide_client.connection.incoming import gateway_frame

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DOC = ROOT / "docs" / "protocol.md"
LINKED_DOCS = [ROOT / "README.md", ROOT / "ios-client-stub" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Paths of a folder beside the repository, which a clone does not have (spelled in pieces so this
# file does not match itself).
OUTSIDE_REFERENCES = ("../" + "shared", "DESIGN" + ".md", "voiceide-event-" + "protocol.md")
NOT_SCANNED = (".venv/", "cdk.out/", ".git/")

FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```\s*$", re.MULTILINE | re.DOTALL)
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\((?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.MULTILINE)


def json_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [match["body"] for match in FENCE.finditer(text) if match["info"].strip() == "json"]


def without_code(text: str) -> str:
    """The document with fenced blocks and inline code removed: links there are examples, not links."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def github_anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    title = re.sub(r"`|\*\*|__", "", title).strip().lower()
    kept = "".join(
        char for char in title if char in " -_" or unicodedata.category(char)[0] in ("L", "N", "M")
    )  # letters, numbers, combining marks
    return kept.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        anchor = github_anchor(match["title"])
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def relative_links(path: Path) -> list[str]:
    targets = [match["target"].strip("<>") for match in LINK.finditer(without_code(path.read_text(encoding="utf-8")))]
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)]


def tracked_files() -> list[Path]:
    """The files a clone gets: git's list when this is a checkout, else every file on disk."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout.decode("utf-8")
        names = [name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = [str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file()]
    return [ROOT / name for name in names if not name.startswith(NOT_SCANNED) and (ROOT / name).is_file()]


# ---- frame examples --------------------------------------------------------------------------

FRAMES = json_blocks(PROTOCOL_DOC)
SCHEMA = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))


def test_the_protocol_document_has_frame_examples_of_every_kind_the_conductor_exchanges() -> None:
    kinds = {name for frame in FRAMES for name in json.loads(frame).get("kind", {})}
    assert kinds >= set(KINDS)
    assert any("kind" not in json.loads(frame) for frame in FRAMES), "an example of API Gateway's own frames"


@pytest.mark.parametrize("frame", FRAMES, ids=[f"example-{index}" for index in range(len(FRAMES))])
def test_every_frame_example_is_a_valid_event_or_a_gateway_frame(frame: str) -> None:
    value = json.loads(frame)
    if "kind" not in value:  # API Gateway speaking for itself: every client must ignore it
        assert gateway_frame(frame) == value
        assert set(value) == {"message", "connectionId", "requestId"}
        return
    parsed = parse_event(frame)
    assert isinstance(parsed, Event), parsed
    assert parsed.kind_name in KINDS
    jsonschema.validate(value, SCHEMA)
    if "seq" in value:  # written by the conductor: UTC, milliseconds, Z
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", value["timestamp"])
        assert value["id"] == value["id"].lower()


def test_partial_examples_are_unnumbered_and_a_session_start_example_announces_sentence_speech() -> None:
    events = [json.loads(frame) for frame in FRAMES if "kind" in json.loads(frame)]
    partials = [event for event in events if "assistantSpeechPartial" in event["kind"]]
    assert partials and all("seq" not in event for event in partials), "partials carry no seq"
    starts = [event["kind"]["sessionStart"] for event in events if "sessionStart" in event["kind"]]
    assert any(SENTENCE_SPEECH in start.get("capabilities", ()) for start in starts)


def test_the_protocol_document_names_every_capability_the_conductor_knows() -> None:
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    for capability in KNOWN_CAPABILITIES:
        assert f"`{capability}`" in text, capability
    starts = [json.loads(frame)["kind"].get("sessionStart") for frame in FRAMES if "kind" in json.loads(frame)]
    announced = {name for start in starts if start for name in start.get("capabilities", ())}
    assert announced >= KNOWN_CAPABILITIES, "a sessionStart example announces each capability"


def _payloads(kind: str) -> list[dict]:
    events = [json.loads(frame) for frame in FRAMES if "kind" in json.loads(frame)]
    return [event["kind"][kind] for event in events if kind in event["kind"]]


def test_the_card_example_applies_to_an_empty_ui_model_and_has_the_documented_fields() -> None:
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    assert '`{"cards": []}`' in text
    documented = set(re.findall(r"^  \| `(\w+)` \|", text, re.MULTILINE))
    assert documented >= {field.name for field in dataclasses.fields(Card)}  # the conductor's card, field by field
    patches = [payload["patch"] for payload in _payloads("assistantUIPatch")]
    assert patches
    for patch in patches:
        model = jsonpatch.apply_patch({"cards": []}, json.loads(patch))
        (card,) = model["cards"]
        assert set(card) <= documented and {"type", "title", "body"} <= set(card)
        assert card["type"] in ("code", "diff", "list")


def test_the_heard_text_and_handoff_examples_are_the_documented_shapes() -> None:
    barge_ins = [error for error in _payloads("error") if error["code"] == ErrorCode.AUDIO_OUTPUT_INTERRUPTED]
    assert any(isinstance(error.get("heardText"), str) for error in barge_ins)
    results = [json.loads(r["result"]) for r in _payloads("toolResult") if r.get("result") and "part" not in r]
    assert any(result.get("spoken") is False and isinstance(result.get("heardText"), str) for result in results)
    handoffs = [start["handoff"] for start in _payloads("sessionStart") if "handoff" in start]
    assert handoffs and all({turn["role"] for turn in h["recentTurns"]} <= {"user", "assistant"} for h in handoffs)


def test_the_schema_the_document_links_is_the_one_the_models_export() -> None:
    assert "../schema/voiceide-event.schema.json" in relative_links(PROTOCOL_DOC)
    assert json_schema() == SCHEMA


def test_the_protocol_document_names_every_error_code_and_kind() -> None:
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    for code in ErrorCode:
        assert f"`{code.value}`" in text, code
    for kind in KINDS:
        assert f"`{kind}`" in text, kind


# ---- links and references --------------------------------------------------------------------


@pytest.mark.parametrize("document", LINKED_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_of_the_repository(document: Path) -> None:
    broken: list[str] = []
    for target in relative_links(document):
        location, _, anchor = target.partition("#")
        resolved = (document.parent / location).resolve() if location else document
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{document.relative_to(ROOT)}: {broken}"


def test_the_readmes_lead_to_the_protocol_and_the_architecture() -> None:
    readme_links = relative_links(ROOT / "README.md")
    assert "docs/protocol.md" in readme_links
    assert "docs/architecture.md" in readme_links
    assert "../docs/protocol.md" in relative_links(ROOT / "ios-client-stub" / "README.md")


README_MAX_BYTES = 15_000
"""The README is what a newcomer reads first, in about five minutes; detail lives in docs/."""


def test_the_readme_is_short_and_leads_to_every_page_of_the_docs() -> None:
    readme = ROOT / "README.md"
    size = len(readme.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes: move detail into a page of docs/"
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(readme)}
    pages = {path.resolve() for path in (ROOT / "docs").glob("*.md")} | {
        (ROOT / "ios-client-stub" / "README.md").resolve()
    }
    assert not pages - linked, (
        f"pages the README does not link: {sorted(str(p.relative_to(ROOT)) for p in pages - linked)}"
    )


def test_the_readme_starts_with_the_quick_start() -> None:
    headings = [
        match["title"] for match in HEADING.finditer(FENCE.sub("", (ROOT / "README.md").read_text(encoding="utf-8")))
    ]
    assert headings[:2] == ["VoiceIDE conductor", "Quick start"]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run " in text and "make test " in text


def test_no_tracked_file_refers_to_documents_outside_the_repository() -> None:
    files = tracked_files()
    assert ROOT / "README.md" in files
    offenders = [
        f"{path.relative_to(ROOT)}: {reference}"
        for path in files
        for reference in OUTSIDE_REFERENCES
        if reference.encode() in path.read_bytes()
    ]
    assert not offenders


def test_the_anchor_rule_matches_githubs_for_the_headings_linked_here() -> None:
    assert github_anchor("Sequence numbers, replay and catch-up") == "sequence-numbers-replay-and-catch-up"
    assert github_anchor("The model's calls, through one wrapper tool") == "the-models-calls-through-one-wrapper-tool"
    assert github_anchor("Backward-compatible extension: `seq` and `lastSeq`") == (
        "backward-compatible-extension-seq-and-lastseq"
    )
