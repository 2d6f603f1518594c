"""Speakable text and on-screen cards from realistic model answers."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.speakable import Card, card_patch, speakable, split_answer, unfinished_block_start

SWIFT_ANSWER = """Here's the updated view. Replace the body in `Sources/App/Views/ContentView.swift`:

```swift
struct ContentView: View {
    var body: some View { Text("Hello") }
}
```

Then build and run it again."""


def test_fenced_swift_block_becomes_a_card_and_a_spoken_pointer() -> None:
    answer = split_answer(SWIFT_ANSWER)
    assert answer.cards == [
        Card(
            type="code",
            title="Swift code for ContentView.swift",
            body='struct ContentView: View {\n    var body: some View { Text("Hello") }\n}',
            language="swift",
            file="Sources/App/Views/ContentView.swift",
        )
    ]
    assert answer.speech == (
        "Here's the updated view. Replace the body in ContentView.swift. "
        "I've put the Swift code for ContentView.swift on screen. Then build and run it again."
    )
    assert "struct" not in answer.speech
    assert answer.display == (
        "Here's the updated view. Replace the body in Sources/App/Views/ContentView.swift:\n\n"
        "[code: Swift code for ContentView.swift]\n\nThen build and run it again."
    )


def test_a_diff_is_a_diff_card_named_by_its_file() -> None:
    text = (
        "This fixes the crash:\n\n```diff\n--- a/Sources/App/main.swift\n+++ b/Sources/App/main.swift\n"
        "@@ -1,3 +1,3 @@\n import Foundation\n-let count = items.count - 1\n+let count = items.count\n```\n"
    )
    answer = split_answer(text)
    [card] = answer.cards
    assert (card.type, card.title, card.file, card.language) == (
        "diff",
        "Diff of main.swift",
        "Sources/App/main.swift",
        "diff",
    )
    assert card.body.startswith("--- a/Sources") and card.body.endswith("+let count = items.count")
    assert answer.speech == "This fixes the crash. The diff of main.swift is on screen."


def test_an_untagged_block_of_plus_and_minus_lines_is_a_diff() -> None:
    [card] = split_answer("```\n-let x = 1\n+let x = 2\n```").cards
    assert card.type == "diff" and card.language is None
    [card] = split_answer("```\n- one\n- two\n```").cards  # only one sign: a list shown as code
    assert card.type == "code"


def test_an_unfenced_unified_diff_is_a_card() -> None:
    text = "Here it is.\n@@ -1,2 +1,2 @@\n-old line\n+new line\n\nThat's all."
    answer = split_answer(text)
    assert [c.type for c in answer.cards] == ["diff"]
    assert answer.cards[0].body == "@@ -1,2 +1,2 @@\n-old line\n+new line"
    assert answer.speech == "Here it is. The diff is on screen. That's all."


def test_a_short_list_is_spoken_a_sentence_per_item() -> None:
    text = "To ship it:\n\n1. Run the **tests**\n2. Bump the version;\n3. Push the tag"
    answer = split_answer(text)
    assert answer.cards == []
    assert answer.speech == "To ship it: Run the tests. Bump the version. Push the tag."
    assert answer.display == "To ship it:\n\n1. Run the tests\n2. Bump the version;\n3. Push the tag"


def test_a_long_list_becomes_a_list_card() -> None:
    items = "\n".join(f"- Step {n}" for n in range(1, 8))
    answer = split_answer(f"You need seven steps:\n{items}\n\nStart with the first.")
    assert answer.cards == [Card(type="list", title="List (7 items)", body=items)]
    assert answer.speech == "You need seven steps. The list of 7 items is on screen. Start with the first."
    assert "[list: List (7 items)]" in answer.display and "Step 3" not in answer.display


def test_headings_and_emphasis_become_plain_sentences() -> None:
    text = (
        "## Why it fails\n\nThe **cache** is *stale* and __never__ _refreshed_.\n\n"
        "### Fix\nClear it with ~~care~~ `rm -rf .build`."
    )
    answer = split_answer(text)
    assert answer.speech == (
        "Why it fails. The cache is stale and never refreshed. Fix. Clear it with care rm -rf .build."
    )
    assert answer.display == (
        "Why it fails.\n\nThe cache is stale and never refreshed.\n\nFix.\nClear it with care rm -rf .build."
    )


def test_identifiers_with_underscores_and_arithmetic_keep_their_characters() -> None:
    assert speakable("Set max_retry_count to 2 * 3 * 4.") == "Set max_retry_count to 2 * 3 * 4."


def test_bare_urls_are_named_by_host_in_speech_only() -> None:
    text = "See https://docs.aws.amazon.com/lambda/latest/dg/welcome.html. Or [the guide](https://www.swift.org/x)."
    answer = split_answer(text)
    assert answer.speech == "See a link to docs.aws.amazon.com. Or the guide."
    assert "https://docs.aws.amazon.com/lambda/latest/dg/welcome.html." in answer.display
    assert speakable("Read <http://www.example.com/a?b=c>") == "Read a link to example.com"


def test_long_paths_are_named_by_their_last_component_in_speech() -> None:
    text = "Open Sources/App/Controllers/UserController.swift and /usr/local/bin/swiftlint, not 12/31/2026."
    answer = split_answer(text)
    assert answer.speech == "Open UserController.swift and swiftlint, not 12/31/2026."
    assert answer.display == text


def test_inline_code_is_kept_when_short_and_named_when_long() -> None:
    text = "Call `fetchUser(id:)` then run `swift build -c release --product VoiceIDEServer --arch arm64`."
    answer = split_answer(text)
    assert answer.speech == "Call fetchUser(id:) then run a code snippet."
    assert answer.display == (
        "Call fetchUser(id:) then run swift build -c release --product VoiceIDEServer --arch arm64."
    )


def test_a_table_becomes_a_list_card() -> None:
    table = "| Model | Latency |\n|---|---:|\n| Haiku | 300 ms |\n| Sonnet | 900 ms |"
    answer = split_answer(f"Here are the numbers:\n\n{table}\n\nHaiku is faster.")
    assert answer.cards == [Card(type="list", title="Table (2 rows)", body=table)]
    assert answer.speech == "Here are the numbers. The table with 2 rows is on screen. Haiku is faster."
    assert "|" not in answer.speech


def test_several_code_blocks_give_cards_in_order() -> None:
    text = (
        "First the model:\n```python\nclass User: ...\n```\nThen the shell:\n~~~bash\npip install x\n~~~\n"
        "And more Python:\n```python\nprint(1)\n```"
    )
    answer = split_answer(text)
    assert [(c.title, c.body) for c in answer.cards] == [
        ("Python code", "class User: ..."),
        ("Shell commands", "pip install x"),
        ("Python code", "print(1)"),
    ]
    assert answer.speech == (
        "First the model. I've put the Python code on screen. Then the shell. I've put the shell commands on screen. "
        "And more Python. There's more Python code on screen."
    )
    assert answer.display.count("[code: ") == 3


def test_an_indented_block_of_two_lines_is_code_and_one_line_is_not() -> None:
    answer = split_answer("Use this:\n\n    let a = 1\n    let b = 2\n\nDone.")
    assert [(c.type, c.body) for c in answer.cards] == [("code", "let a = 1\nlet b = 2")]
    assert answer.speech == "Use this. I've put the code on screen. Done."
    assert split_answer("Use this:\n\n    let a = 1\n\nDone.").cards == []


def test_a_file_named_in_the_fence_info_string() -> None:
    [card] = split_answer("```swift title=Package.swift\nlet package = Package()\n```").cards
    assert (card.language, card.file, card.title) == ("swift", "Package.swift", "Swift code for Package.swift")
    [card] = split_answer("```main.py\nprint(1)\n```").cards
    assert (card.language, card.file) == ("py", "main.py")


def test_a_fence_inside_a_list_item_is_dedented_and_splits_the_list() -> None:
    answer = split_answer("1. Open the file:\n   ```swift\n   let x = 1\n     .map { $0 }\n   ```\n2. Run it.")
    assert [c.body for c in answer.cards] == ["let x = 1\n  .map { $0 }"]
    assert answer.speech == "Open the file. I've put the Swift code on screen. Run it."


def test_an_untagged_block_after_a_sentence_naming_a_file_is_named_after_it() -> None:
    [card] = split_answer("Now edit `Sources/App/main.swift`:\n\n```\nlet x = 1\n```").cards
    assert (card.title, card.language, card.file) == ("Swift code for main.swift", None, "Sources/App/main.swift")
    [card] = split_answer("Update main.swift. Then paste this:\n```\nlet x = 1\n```").cards
    assert card.file is None  # only the sentence right before the block counts


def test_a_single_column_table_is_a_card() -> None:
    [card] = split_answer("| Step |\n|---|\n| build |").cards
    assert (card.type, card.title) == ("list", "Table (1 row)")


def test_only_code_speaks_only_the_pointer() -> None:
    assert speakable("```swift\nlet x = 1\n```") == "I've put the Swift code on screen."
    assert speakable("```\n```") == ""  # an empty block shows nothing


def test_text_without_markdown_is_unchanged() -> None:
    text = "Your build passed. The app is running on the simulator, and the tests took twelve seconds."
    answer = split_answer(text)
    assert (answer.speech, answer.display, answer.cards) == (text, text, [])


def test_prose_lines_join_in_speech_and_keep_their_breaks_on_screen() -> None:
    text = "The first line\nwraps here.\n\nA new paragraph\n\nAnd another."
    answer = split_answer(text)
    assert answer.speech == "The first line wraps here. A new paragraph. And another."
    assert answer.display == text


def test_card_patch_is_an_rfc6902_add_to_the_cards_array() -> None:
    card = Card(type="code", title="Swift code", body='print("héllo")', language="swift")
    patch = card_patch(card)
    assert json.loads(patch) == [
        {
            "op": "add",
            "path": "/cards/-",
            "value": {"type": "code", "title": "Swift code", "language": "swift", "body": 'print("héllo")'},
        }
    ]
    assert "héllo" in patch and "file" not in patch


def test_unfinished_block_start_while_streaming() -> None:
    assert unfinished_block_start("Here it is:\n```swift\nlet x") == 12
    assert unfinished_block_start("Here it is:\n``") == 12  # may still become a fence
    assert unfinished_block_start("Here it is:\n```swift\nlet x = 1\n```\nDone.") is None
    assert unfinished_block_start("Steps:\n1. Build\n2. Test\n") == 7  # the list may still grow
    assert unfinished_block_start("Steps:\n1. Build\n2. Test\n\nThen ship.") is None
    assert unfinished_block_start("Numbers:\n| a | b |\n") == 9  # a table header
    assert unfinished_block_start("Fixed:\n@@ -1 +1 @@\n-a\n+b") == 7
    assert unfinished_block_start("No blocks here. Still talking") is None
    assert unfinished_block_start("") is None


def test_inline_reasoning_is_neither_shown_nor_spoken_nor_cut_into_cards() -> None:
    text = "<thinking>I should show code:\n```swift\nlet x = 1\n```</thinking>Here's the fix:\n```swift\nlet y = 2\n```"
    answer = split_answer(text)
    assert answer.display == "Here's the fix:\n[code: Swift code]"
    assert answer.speech == "Here's the fix. I've put the Swift code on screen."
    assert [card.body for card in answer.cards] == ["let y = 2"]


def test_unfinished_block_start_holds_back_reasoning_still_open_and_blocks_after_a_region() -> None:
    assert unfinished_block_start("<thinking>The user") == 0
    assert unfinished_block_start("Sure. <thin") == 6
    text = "<thinking>plan</thinking>Here:\n```swift\nlet x"
    assert text[: unfinished_block_start(text)] == "<thinking>plan</thinking>Here:\n"


def test_inline_math_in_a_short_list_is_shown_as_written_and_spoken_as_words() -> None:
    answer = split_answer("- $x^2$ is the area\n- $\\pi r^2$ the circle")
    assert answer.display == "• $x^2$ is the area\n• $\\pi r^2$ the circle"
    assert answer.speech == "x squared is the area. pi r squared the circle."


def test_every_streamed_prefix_of_an_answer_holds_back_its_unclosed_fence() -> None:
    for end in range(len(SWIFT_ANSWER) + 1):
        prefix = SWIFT_ANSWER[:end]
        start = unfinished_block_start(prefix)
        complete = prefix if start is None else prefix[:start]
        assert "```" not in complete or complete.count("```") % 2 == 0


PROSE = st.sampled_from(
    [
        "Here's the fix.",
        "## Changes",
        "# Summary",
        "**Note:** this runs on *every* request.",
        "See https://docs.aws.amazon.com/lambda/latest/dg/welcome.html for details.",
        "The handler lives in Sources/App/Controllers/UserController.swift now.",
        "Use `let x = 1` or [the docs](http://example.com/docs).",
        "- one\n- two",
        "1. build\n2. test\n3. ship\n4. tag\n5. announce",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "#hashtag and ***strong*** words",
        "Plain text with no markup",
    ]
)
BODY_LINE = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="`~"), min_size=0, max_size=30
)
BODY = st.lists(BODY_LINE, min_size=1, max_size=4).map("\n".join).filter(lambda body: body.strip() != "")
FENCE = st.tuples(st.sampled_from(["", "swift", "diff", "python main.py", "swift title=main.swift"]), BODY)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(PROSE, FENCE), max_size=8),
    st.sampled_from(["\n", "\n\n"]),
)
def test_speech_never_carries_markdown_and_every_fenced_body_is_in_one_card(parts, separator) -> None:
    bodies = [part[1] for part in parts if isinstance(part, tuple)]
    text = separator.join(f"```{part[0]}\n{part[1]}\n```" if isinstance(part, tuple) else part for part in parts)
    answer = split_answer(text)
    for marker in ("```", "**", "http://", "https://"):
        assert marker not in answer.speech
    assert not any(line.lstrip().startswith("#") for line in answer.speech.splitlines())
    assert [card.body for card in answer.cards if card.type != "list"] == bodies
    assert answer.speech.strip() == answer.speech and "  " not in answer.speech
    if bodies:
        assert "on screen" in answer.speech
    if parts:
        assert answer.speech, "a non-empty answer speaks something"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_yields_speech_without_markdown_markers(text) -> None:
    speech = speakable(text)
    assert not re.search(r"```|\*\*|https?://", speech, re.I)
    assert not speech.startswith("#")
    start = unfinished_block_start(text)
    assert start is None or 0 <= start <= len(text)
