"""LaTeX read as words for tts.speak; display math on a card; money never taken for math."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.math_speech import Formulas, speak_math
from shared.core.speakable import Card, card_patch, split_answer, unfinished_block_start


@pytest.mark.parametrize(
    ("latex", "spoken"),
    [
        (r"10^6 \mid n!", "10 to the power of 6 divides n factorial"),
        ("x^2 + y^3", "x squared plus y cubed"),
        ("2^{10}", "2 to the power of 10"),
        ("e^{i\\pi} + 1 = 0", "e to the power of i pi plus 1 equals 0"),
        ("x^{-1}", "x to the power of minus 1"),
        ("a_i + a_{n+1}", "a sub i plus a sub n plus 1"),
        (r"\frac{a}{b}", "a over b"),
        (r"\frac12", "1 over 2"),
        (r"\frac{n+1}{2}", "the quantity n plus 1 over 2"),
        (r"\sqrt{x}", "the square root of x"),
        (r"\sqrt[3]{27}", "the cube root of 27"),
        (r"a \cdot b \times c", "a times b times c"),
        (r"x \le y", "x is less than or equal to y"),
        (r"x \geq y", "x is greater than or equal to y"),
        (r"x \neq 0", "x is not equal to 0"),
        (r"\pi \approx 3.14", "pi is approximately 3.14"),
        (r"\alpha + \beta = \Gamma", "alpha plus beta equals gamma"),
        (r"\sum_{i=1}^{n} i", "the sum from i equals 1 to n of i"),
        (r"\int_0^1 x \, dx", "the integral from 0 to 1 of x d x"),
        (r"\lim_{x \to \infty} f(x)", "the limit as x approaches infinity of f of x"),
        (r"\log_2 n", "log base 2 of n"),
        (r"O(n \log n)", "O of n log n"),
        (r"x \text{ if } x > 0", "x if x is greater than 0"),
        (r"\left( \frac{a}{b} \right)^2", "the quantity a over b squared"),
        (r"n(n+1)", "n times the quantity n plus 1"),
        (r"90^\circ", "90 degrees"),
        (r"\binom{n}{k}", "n choose k"),
        (r"\infty", "infinity"),
    ],
)
def test_common_constructs_are_read_as_words(latex: str, spoken: str) -> None:
    assert speak_math(latex) == spoken


def test_inline_math_is_spoken_and_kept_as_written_on_screen() -> None:
    text = r"The sum is $10^6 \mid n!$ for large n, and \( x^2 \) grows."
    answer = split_answer(text)
    assert answer.speech == "The sum is 10 to the power of 6 divides n factorial for large n, and x squared grows."
    assert answer.display == text  # apps may render it


@pytest.mark.parametrize(
    "text",
    [
        "It costs $5 and $10.",
        "Put it in $HOME/bin and run it.",
        "Between $5 and $10, or $1,000 at most.",
        "Set $PATH and $HOME_DIR first.",
        "It costs $ 5 and $x^2 $ is not closed.",
        "From $5 to $10_000 or $2_500$1 each.",  # a digit right after the closing dollar: not math
    ],
)
def test_money_and_shell_variables_are_not_math(text: str) -> None:
    answer = split_answer(text)
    assert answer.speech.rstrip(".") == text.rstrip(".") and answer.display == text


def test_math_in_inline_code_stays_code() -> None:
    assert split_answer("Run `echo $x^2$` now.").speech == "Run echo $x^2$ now."


@pytest.mark.parametrize(
    ("text", "body"),
    [
        ("The identity:\n$$\ne^{i\\pi} + 1 = 0\n$$\nNeat.", "e^{i\\pi} + 1 = 0"),
        ("The identity:\n$$e^{i\\pi} + 1 = 0$$\nNeat.", "e^{i\\pi} + 1 = 0"),
        ("The identity:\n\\[\ne^{i\\pi} + 1 = 0\n\\]\nNeat.", "e^{i\\pi} + 1 = 0"),
        (
            "The identity:\n\\begin{equation}\ne^{i\\pi} + 1 = 0\n\\end{equation}\nNeat.",
            "\\begin{equation}\ne^{i\\pi} + 1 = 0\n\\end{equation}",
        ),
        ("The identity:\n```math\ne^{i\\pi} + 1 = 0\n```\nNeat.", "e^{i\\pi} + 1 = 0"),
    ],
)
def test_display_math_goes_to_a_card_and_the_speech_points_to_it(text: str, body: str) -> None:
    answer = split_answer(text)
    assert answer.cards == [Card("math", "Equation", body, "latex")]
    assert answer.display == "The identity:\n[math: Equation]\nNeat."
    assert answer.speech == "The identity. The equation is on screen. Neat."


def test_a_second_equation_is_another_one() -> None:
    answer = split_answer("First:\n$$a^2$$\nThen:\n$$b^2$$")
    assert answer.speech == "First. The equation is on screen. Then. Another equation is on screen."


def test_a_math_card_patch() -> None:
    patch = card_patch(Card("math", "Equation", "a^2 + b^2 = c^2", "latex"))
    assert patch == (
        '[{"op":"add","path":"/cards/-","value":{"type":"math","title":"Equation","language":"latex",'
        '"body":"a^2 + b^2 = c^2"}}]'
    )


def test_display_math_still_streaming_is_held_back() -> None:
    assert unfinished_block_start("So:\n$$\ne^{i\\pi") == 4
    assert unfinished_block_start("So:\n\\begin{align}\na &= b") == 4
    assert unfinished_block_start("So:\n$") == 4  # may become $$
    assert unfinished_block_start("So:\n\\begin{equ") == 4
    assert unfinished_block_start("So:\n$$a^2$$\nDone.") is None
    assert unfinished_block_start("It costs $5 and") is None


def test_a_sentence_is_never_cut_inside_a_formula() -> None:
    text = r"Then $n! \cdot 2$ grows. And $$x. y$$ too."
    formulas = Formulas(text)
    assert formulas.covers(text.index("!"))
    assert not formulas.covers(text.index("grows."))
    streaming = r"Then $n! \cdot 2"  # the closing dollar has not arrived yet
    assert Formulas(streaming).covers(streaming.index("!"))
    block = "So:\n$$\nx = 1. y = 2\n$$\nDone."
    assert Formulas(block).covers(block.index(". y"))
    assert not Formulas("It costs $5! Wow. Yes").covers(len("It costs $5"))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_latex_reads_as_words_without_markup(latex: str) -> None:
    spoken = speak_math(latex)
    assert not re.search(r"[\\{}^_$]", spoken)
    assert spoken == spoken.strip() and "  " not in spoken


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="$\\^_{}()[]x2 +!.", max_size=60))
def test_any_text_of_math_characters_is_read_and_scanned_without_failing(text: str) -> None:
    answer = split_answer(text)
    assert answer.speech == answer.speech.strip()
    start = unfinished_block_start(text)
    assert start is None or 0 <= start <= len(text)


def test_double_dollars_in_prose_do_not_open_a_block() -> None:
    text = "$$ is the PID of the shell. It changes. Yes"
    answer = split_answer(text)
    assert (answer.display, answer.cards) == (text, [])
    assert unfinished_block_start(text) is None
    assert not Formulas(text).covers(text.index(". It"))
