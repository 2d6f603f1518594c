"""Transcripts sent as the app's speech recognizer sends them: partials word by word, then the final."""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.wire.protocol import Event, SessionStart, UserAudioTranscriptFinal, UserAudioTranscriptPartial
from voiceide_client.command_line import arguments, cli
from voiceide_client.command_line.arguments import DEFAULT_PACE, EXIT_OK, EXIT_USAGE, build_parser, recognizer_pace
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.connection.local_stub import OFFLINE_REPLY
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.voice.recognizer import RecognizerPace, cumulative_partials, send_transcript, speaking_time

from .fake_conductor import FakeConductor, FakeSession, async_test, standard_turn

TINY = RecognizerPace(word_interval_s=0.001, final_after_s=0.001)
USER_KINDS = ("userAudioTranscriptPartial", "userAudioTranscriptFinal")


def _speech(events: list[Event]) -> list[tuple[str, str]]:
    """The person's speech among ``events``: (kind, text), in order."""
    return [
        (event.kind_name, event.payload.text)
        for event in events
        if isinstance(event.payload, UserAudioTranscriptPartial | UserAudioTranscriptFinal)
    ]


def _user_speech(session: FakeSession) -> list[tuple[str, str]]:
    """What the conductor received of the person's speech: (kind, text), in order."""
    return _speech([event for _, event in session.received])


# ---- cutting a text into partials ----------------------------------------------------------------


def test_a_text_is_cut_into_its_cumulative_words() -> None:
    assert cumulative_partials("open the file") == ["open", "open the", "open the file"]
    assert cumulative_partials("  open\tthe \n file ") == ["open", "open the", "open the file"]
    assert cumulative_partials("hello") == ["hello"]
    assert cumulative_partials("") == []
    assert cumulative_partials(" \t\n") == []


@given(st.text())
def test_the_partials_grow_a_word_at_a_time_up_to_the_whole_text(text: str) -> None:
    partials = cumulative_partials(text)
    words = text.split()
    assert len(partials) == len(words)
    if words:
        assert partials[-1] == " ".join(words)
    for shorter, longer in itertools.pairwise(partials):
        assert longer.startswith(shorter + " ")
        assert len(longer.split()) == len(shorter.split()) + 1


# ---- the pace ------------------------------------------------------------------------------------


def test_the_default_pace_is_a_word_every_200_ms_and_800_ms_of_silence() -> None:
    pace = RecognizerPace()
    assert (pace.word_interval_s, pace.final_after_s, pace.final_text) == (0.2, 0.8, None)
    assert pace == RecognizerPace(DEFAULT_PACE.word_interval_s, DEFAULT_PACE.final_after_s)
    assert DEFAULT_PACE.longest_s == 2.0  # a long text (a paste) is not typed at 200 ms a word


@pytest.mark.parametrize(
    ("spec", "word_interval_s", "final_after_s"),
    [
        ("200:800", 0.2, 0.8),
        ("100:500", 0.1, 0.5),
        ("0:0", 0.0, 0.0),
        (" 150.5 : 1000 ", 0.1505, 1.0),
    ],
)
def test_a_pace_spec_is_ms_per_word_and_silence_ms(spec: str, word_interval_s: float, final_after_s: float) -> None:
    pace = RecognizerPace.parse(spec)
    assert pace.word_interval_s == pytest.approx(word_interval_s)
    assert pace.final_after_s == pytest.approx(final_after_s)
    assert pace.final_text is None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("", "is not MS_PER_WORD:SILENCE_MS"),
        ("200", "is not MS_PER_WORD:SILENCE_MS"),
        ("1:2:3", "is not MS_PER_WORD:SILENCE_MS"),
        ("200:", "SILENCE_MS '' is not a number"),
        (":800", "MS_PER_WORD '' is not a number"),
        ("fast:slow", "MS_PER_WORD 'fast' is not a number"),
        ("-1:800", "MS_PER_WORD must be 0 or more"),
        ("200:-5", "SILENCE_MS must be 0 or more"),
        ("inf:800", "MS_PER_WORD must be 0 or more"),
        ("200:nan", "SILENCE_MS must be 0 or more"),
    ],
)
def test_a_bad_pace_spec_is_refused_saying_why(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"^[^\n]+$") as caught:
        RecognizerPace.parse(spec)
    assert says in str(caught.value)


@pytest.mark.parametrize("field", ["word_interval_s", "final_after_s"])
@pytest.mark.parametrize("value", [-0.001, float("inf"), float("nan")])
def test_a_pace_refuses_negative_or_endless_pauses(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RecognizerPace(**{field: value})


def test_speaking_takes_the_pauses_between_words_and_the_silence() -> None:
    pace = RecognizerPace(word_interval_s=0.2, final_after_s=0.8)
    assert pace.speaking_s("open the file") == pytest.approx(2 * 0.2 + 0.8)
    assert pace.speaking_s("hello") == pytest.approx(0.8)
    assert pace.speaking_s("  ") == 0.0
    assert speaking_time("open the file", None) == 0.0


class _Recorder:
    """What ``send_transcript`` sends and the pauses it asks for, in one sequence."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str] | float] = []

    async def send(self, event: Event) -> None:
        payload = event.payload
        assert isinstance(payload, UserAudioTranscriptPartial | UserAudioTranscriptFinal)
        assert event.seq is None
        self.steps.append((event.kind_name, payload.text))

    async def sleep(self, seconds: float) -> None:
        self.steps.append(seconds)


@async_test
async def test_partials_come_a_word_interval_apart_and_the_final_after_the_silence() -> None:
    recorder = _Recorder()
    pace = RecognizerPace(word_interval_s=0.25, final_after_s=1.5)
    await send_transcript(recorder.send, "open the file", pace, sleep=recorder.sleep)
    assert recorder.steps == [
        ("userAudioTranscriptPartial", "open"),
        0.25,
        ("userAudioTranscriptPartial", "open the"),
        0.25,
        ("userAudioTranscriptPartial", "open the file"),
        1.5,
        ("userAudioTranscriptFinal", "open the file"),
    ]


@async_test
async def test_without_a_pace_only_the_final_is_sent_and_blank_speech_has_no_partials() -> None:
    recorder = _Recorder()
    await send_transcript(recorder.send, "open the file", None, sleep=recorder.sleep)
    await send_transcript(recorder.send, "  ", RecognizerPace(), sleep=recorder.sleep)
    assert recorder.steps == [("userAudioTranscriptFinal", "open the file"), ("userAudioTranscriptFinal", "  ")]


# ---- say(..., speaking=...) against the fake conductor ----------------------------------------------


@async_test
async def test_say_speaking_sends_a_partial_per_word_then_one_final() -> None:
    async with (
        FakeConductor(standard_turn("Opening it now")) as fake,
        ConductorClient(fake.url) as client,
    ):
        turn = await client.say("open the  readme file", timeout=5, speaking=TINY)
        session = fake.sessions[client.session_id]

        assert turn.completed and turn.transcript == "open the  readme file"
        assert turn.final_text == "Opening it now"
        assert _user_speech(session) == [
            ("userAudioTranscriptPartial", "open"),
            ("userAudioTranscriptPartial", "open the"),
            ("userAudioTranscriptPartial", "open the readme"),
            ("userAudioTranscriptPartial", "open the readme file"),
            ("userAudioTranscriptFinal", "open the  readme file"),  # the final is the text as given
        ]
        assert session.transcripts() == ["open the  readme file"]
        # partials are recorded as sent, like every other event, before the final
        sent = [e.kind_name for e in client.sent if e.kind_name in USER_KINDS]
        assert sent == ["userAudioTranscriptPartial"] * 4 + ["userAudioTranscriptFinal"]
        assert all(e.seq is None for e in client.sent if e.kind_name in USER_KINDS)
        assert next(e.kind_name for _, e in session.received) == "sessionStart"


@async_test
async def test_a_revised_final_says_final_text_after_the_partials_of_the_text() -> None:
    revised = RecognizerPace(word_interval_s=0.001, final_after_s=0.001, final_text="Open the file.")
    async with FakeConductor() as fake, ConductorClient(fake.url) as client:
        turn = await client.say("open the fail", timeout=5, speaking=revised)
        session = fake.sessions[client.session_id]

    assert turn.completed
    assert turn.transcript == "Open the file."
    assert _user_speech(session) == [
        ("userAudioTranscriptPartial", "open"),
        ("userAudioTranscriptPartial", "open the"),
        ("userAudioTranscriptPartial", "open the fail"),
        ("userAudioTranscriptFinal", "Open the file."),
    ]


@async_test
async def test_turns_with_and_without_partials_follow_one_another() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url) as client:
        await client.say("first one", timeout=5)
        await client.say("second one", timeout=5, speaking=TINY)
        await client.say("third one", timeout=5)
        session = fake.sessions[client.session_id]

    assert _user_speech(session) == [
        ("userAudioTranscriptFinal", "first one"),
        ("userAudioTranscriptPartial", "second"),
        ("userAudioTranscriptPartial", "second one"),
        ("userAudioTranscriptFinal", "second one"),
        ("userAudioTranscriptFinal", "third one"),
    ]
    assert [turn.completed for turn in client.turns] == [True, True, True]


@async_test
async def test_the_turn_records_when_the_final_went_and_when_each_event_came() -> None:
    async with FakeConductor(standard_turn("Hi there friend")) as fake, ConductorClient(fake.url) as client:
        plain = await client.say("hello", timeout=5)
        spoken = await client.say("hello again", timeout=5, speaking=TINY)

    for turn in (plain, spoken):
        assert turn.final_sent_at is not None
        assert len(turn.received_at) == len(turn.events)
        assert turn.received_at == sorted(turn.received_at)
        assert turn.first_partial_at is not None and turn.first_speak_at is not None
        # the answer comes after the final that asked for it, the first partial before the first tts.speak
        assert turn.final_sent_at <= turn.received_at[0] <= turn.first_partial_at <= turn.first_speak_at
        assert turn.first_at(lambda event: event.kind_name == "assistantSpeechFinal") is not None
    assert plain.final_sent_at is not None and spoken.final_sent_at is not None
    assert plain.final_sent_at < spoken.final_sent_at


@async_test
async def test_offline_the_local_stub_hears_the_partials_and_answers_the_final() -> None:
    async with FakeConductor() as fake:
        client = ConductorClient(fake.url, backoff=scaled_backoff(0.001))
        await client.connect()
        await fake.stop()
        await client.wait_until(lambda: client.offline)
    try:
        turn = await client.say("are you there", timeout=5, speaking=TINY)
    finally:
        await client.close()

    assert turn.completed and turn.final_text == OFFLINE_REPLY
    assert client.stub is not None
    assert _speech(client.stub.received) == [
        ("userAudioTranscriptPartial", "are"),
        ("userAudioTranscriptPartial", "are you"),
        ("userAudioTranscriptPartial", "are you there"),
        ("userAudioTranscriptFinal", "are you there"),
    ]
    # the stub answers while the final is being delivered: the time is taken before
    assert turn.final_sent_at is not None and turn.first_partial_at is not None
    assert turn.final_sent_at <= turn.first_partial_at


# ---- the CLI -------------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _parse(*options: str) -> argparse.Namespace:
    return build_parser().parse_args(["--url", "ws://127.0.0.1:8080/", *options])


def test_the_partials_options_parse() -> None:
    assert _parse().partials is None
    assert _parse("--partials").partials == DEFAULT_PACE
    assert _parse("--partials", "100:500").partials == RecognizerPace(word_interval_s=0.1, final_after_s=0.5)
    assert _parse("--partials", "--quiet").partials == DEFAULT_PACE
    assert _parse("--no-partials").partials is False


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--partials", "fast"], "argument --partials: 'fast' is not MS_PER_WORD:SILENCE_MS"),
        (["--partials", "-5:800"], "unrecognized arguments: -5:800"),  # argparse takes it for an option
        (["--partials=-5:800"], "argument --partials: '-5:800': MS_PER_WORD must be 0 or more milliseconds"),
        (["--partials", "200:800", "--no-partials"], "argument --no-partials: not allowed with argument --partials"),
    ],
)
def test_a_bad_partials_option_is_a_usage_error(
    options: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(*options)
    assert exited.value.code == EXIT_USAGE
    message = capsys.readouterr().err
    assert message.startswith("voiceide-client: ") and says in message
    assert message.count("\n") == 1


@pytest.mark.parametrize(
    ("options", "stdin", "pace"),
    [
        ([], _Terminal(), DEFAULT_PACE),  # a person typing: as they would say it
        ([], io.StringIO(), None),  # piped input: finals only, fast
        (["--script", "s.txt"], _Terminal(), None),  # a script: finals only, fast
        (["--no-partials"], _Terminal(), None),
        (["--partials"], io.StringIO(), DEFAULT_PACE),
        (["--partials", "10:20", "--script", "s.txt"], io.StringIO(), RecognizerPace(0.01, 0.02)),
    ],
)
def test_partials_are_on_for_a_person_typing_and_off_for_scripts_unless_asked(
    options: list[str], stdin: io.StringIO, pace: RecognizerPace | None
) -> None:
    assert recognizer_pace(_parse(*options), stdin) == pace


def test_a_bad_partials_spec_exits_with_the_usage_code() -> None:
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        asyncio.run(cli.run(["--url", "ws://127.0.0.1:1/", "--partials", "200"], stderr=err))
    assert exited.value.code == EXIT_USAGE == 2


@async_test
async def test_a_script_with_partials_sends_each_line_as_speech(tmp_path: Path) -> None:
    script = tmp_path / "script.txt"
    script.write_text("hello there\nopen it\n", encoding="utf-8")
    session_id = str(uuid.uuid4())
    out = io.StringIO()
    async with FakeConductor(standard_turn("Okay.")) as fake:
        argv = ["--url", fake.url, "--session", session_id, "--script", str(script), "--partials", "1:1"]
        code = await cli.run(argv, stdout=out, stderr=io.StringIO())
        session = fake.sessions[session_id]

    assert code == EXIT_OK
    assert _user_speech(session) == [
        ("userAudioTranscriptPartial", "hello"),
        ("userAudioTranscriptPartial", "hello there"),
        ("userAudioTranscriptFinal", "hello there"),
        ("userAudioTranscriptPartial", "open"),
        ("userAudioTranscriptPartial", "open it"),
        ("userAudioTranscriptFinal", "open it"),
    ]
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("you:")] == ["you: hello there", "you: open it"]


@async_test
async def test_a_script_sends_finals_only_by_default(tmp_path: Path) -> None:
    script = tmp_path / "script.txt"
    script.write_text("hello there\n", encoding="utf-8")
    async with FakeConductor(standard_turn("Okay.")) as fake:
        code = await cli.run(["--url", fake.url, "--script", str(script)], stdout=io.StringIO(), stderr=io.StringIO())
        session = next(iter(fake.sessions.values()))

    assert code == EXIT_OK
    assert _user_speech(session) == [("userAudioTranscriptFinal", "hello there")]


@async_test
async def test_typing_on_a_terminal_sends_partials_and_no_partials_turns_them_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(arguments, "DEFAULT_PACE", TINY)  # the terminal's default pace, made quick
    speech: dict[str, list[tuple[str, str]]] = {}
    async with FakeConductor(standard_turn("Okay.")) as fake:
        for options in ([], ["--no-partials"]):
            session_id = str(uuid.uuid4())
            argv = ["--url", fake.url, "--session", session_id, "--quiet", *options]
            code = await cli.run(argv, stdin=_Terminal("open the file\n"), stdout=io.StringIO(), stderr=io.StringIO())
            assert code == EXIT_OK
            speech[" ".join(options)] = _user_speech(fake.sessions[session_id])
            starts = [e for _, e in fake.sessions[session_id].received if isinstance(e.payload, SessionStart)]
            assert len(starts) == 1

    assert speech[""] == [
        ("userAudioTranscriptPartial", "open"),
        ("userAudioTranscriptPartial", "open the"),
        ("userAudioTranscriptPartial", "open the file"),
        ("userAudioTranscriptFinal", "open the file"),
    ]
    assert speech["--no-partials"] == [("userAudioTranscriptFinal", "open the file")]
