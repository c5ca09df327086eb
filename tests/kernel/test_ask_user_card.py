from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import pytest

from deeptutor_jupyter.interaction.schema import AskUserPayload
from deeptutor_jupyter.kernel.widgets import ask_user_strings
from deeptutor_jupyter.kernel.widgets.ask_user_card import AskUserCard, local_time, s

OPTIONS = [
    {"id": "safe", "label": "Analyse first", "description": "read only", "recommended": True},
    {"id": "implement", "label": "Implement", "description": "edit the workspace"},
    {"id": "skip", "label": "Skip"},
]
ANSWERED_AT = 1_700_000_000.0


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str, bool]] = []

    def __call__(self, selections: list[str], custom_input: str, cancelled: bool) -> None:
        self.calls.append((selections, custom_input, cancelled))


def payload(mode: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "ask_1",
        "tool_call_id": "call_1",
        "session_id": "sess-1",
        "title": "How should I proceed?",
        "description": "It changes which tools I use.",
        "mode": mode,
        "options": OPTIONS if mode in ("single", "multiple", "toggle") else [],
        "allow_custom": False,
        "expires_at": 0,
    }
    return {**base, **extra}


def make(mode: str, language: str = "en", **extra: Any) -> tuple[AskUserCard, Recorder]:
    rec = Recorder()
    card = AskUserCard(payload(mode, **extra), on_submit=rec, language=language)
    return card, rec


def walk(widget: Any) -> Iterator[Any]:
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def shown(card: AskUserCard) -> list[Any]:
    return list(walk(card))


def text_of(card: AskUserCard) -> str:
    parts = []
    for w in walk(card):
        if isinstance(w, (widgets.HTML, widgets.HTMLMath)):
            parts.append(w.value)
        elif isinstance(w, widgets.RadioButtons):
            parts.extend(w._options_labels)
        elif hasattr(w, "description"):
            parts.append(w.description)
    return "\n".join(parts)


def with_class(card: AskUserCard, name: str) -> list[Any]:
    return [w for w in walk(card) if name in getattr(w, "_dom_classes", ())]


# rendering each mode ---------------------------------------------------------------------------


def test_card_exposes_ids_classes_and_buttons() -> None:
    card, _ = make("single")
    assert card.request_id == "ask_1"
    assert card.tool_call_id == "call_1"
    assert card.session_id == "sess-1"
    assert card.state == "open"
    assert "dt-ask-user" in card._dom_classes
    assert with_class(card, "dt-ask-submit") == [card.submit_button]
    assert with_class(card, "dt-ask-cancel") == [card.cancel_button]
    assert card.submit_button.description == "Submit"
    assert card.cancel_button.description == "Cancel"
    assert "<b>How should I proceed?</b>" in card.title.value
    assert "It changes which tools I use." in text_of(card)


def test_single_is_radio_of_ids_with_labels_mark_and_descriptions() -> None:
    card, rec = make("single")
    choice = card.controls["choice"]
    assert isinstance(choice, widgets.RadioButtons)
    assert [value for _, value in choice.options] == ["safe", "implement", "skip"]
    assert choice.options[0][0] == "Analyse first  ★ recommended — read only"
    assert choice.options[1][0] == "Implement — edit the workspace"
    assert choice.options[2][0] == "Skip"
    assert choice.value is None  # the recommended option is not preselected
    assert card.submit_button.disabled
    assert "Pick an option" in card.hint.value
    assert "read only" in text_of(card) and "edit the workspace" in text_of(card)
    assert "custom" not in card.controls

    choice.value = "implement"
    assert not card.submit_button.disabled
    assert card.hint.value == ""
    card.submit_button.click()
    assert rec.calls == [(["implement"], "", False)]
    assert card.state == "submitted"


def test_single_click_before_a_choice_sends_nothing() -> None:
    card, rec = make("single")
    card.submit_button.click()  # code can click a disabled button; the card must still refuse
    assert rec.calls == []
    assert card.state == "open"


def test_equal_radio_labels_stay_distinct() -> None:
    options = [{"id": "a", "label": "Same"}, {"id": "b", "label": "Same"}]
    card, _ = make("single", options=options)
    labels = [label for label, _ in card.controls["choice"].options]
    assert len(set(labels)) == 2


def test_single_with_allow_custom_accepts_other_text_alone() -> None:
    card, rec = make("single", allow_custom=True)
    custom = card.controls["custom"]
    assert isinstance(custom, widgets.Text)
    assert custom.description == "Other"
    assert "fill in “Other”" in card.hint.value
    custom.value = "   "
    assert card.submit_button.disabled
    custom.value = "neither — 先讨论 🙂"
    assert not card.submit_button.disabled
    card.submit_button.click()
    assert rec.calls == [([], "neither — 先讨论 🙂", False)]


def test_multiple_sends_checked_ids_in_option_order_and_custom_verbatim() -> None:
    card, rec = make("multiple", allow_custom=True)
    checks = card.controls["checks"]
    assert list(checks) == ["safe", "implement", "skip"]
    assert all(isinstance(box, widgets.Checkbox) for box in checks.values())
    # The same label, mark and description as a radio option of single mode.
    assert checks["safe"].description == "Analyse first  ★ recommended — read only"
    assert card.submit_button.disabled  # one rule: an option, or Other text
    card.controls["custom"].value = "x"
    assert not card.submit_button.disabled
    checks["skip"].value = True
    checks["safe"].value = True
    card.controls["custom"].value = "  also: 测试 <b>x</b>\nline two "
    card.submit_button.click()
    assert rec.calls == [(["safe", "skip"], "  also: 测试 <b>x</b>\nline two ", False)]


@pytest.mark.parametrize("mode", ["multiple", "toggle"])
def test_multiple_and_toggle_follow_the_one_submit_rule(mode: str) -> None:
    card, rec = make(mode)
    card.submit_button.click()
    assert rec.calls == [] and card.submit_button.disabled
    assert "Pick at least one option to submit." in card.hint.value


def test_toggle_needs_at_least_one() -> None:
    card, rec = make("toggle")
    toggles = card.controls["toggles"]
    assert all(isinstance(b, widgets.ToggleButton) for b in toggles.values())
    assert toggles["implement"].tooltip == "edit the workspace"
    assert card.submit_button.disabled
    assert "at least one" in card.hint.value
    card.submit_button.click()
    assert rec.calls == []
    toggles["implement"].value = True
    assert not card.submit_button.disabled
    toggles["implement"].value = False
    assert card.submit_button.disabled
    toggles["skip"].value = True
    toggles["safe"].value = True
    card.submit_button.click()
    assert rec.calls == [(["safe", "skip"], "", False)]


def enter(field: widgets.Text) -> None:
    """What the browser sends when the learner presses Enter in a one-line box."""
    field._handle_custom_msg({"event": "submit"}, [])


def test_text_is_one_line_and_enter_submits() -> None:
    card, rec = make("text", allow_custom=True)
    assert type(card.controls["text"]) is widgets.Text
    assert "custom" not in card.controls  # the text itself is the custom input
    enter(card.controls["text"])  # nothing typed: the same gate as the button
    assert rec.calls == [] and card.submit_button.disabled
    card.controls["text"].value = "about 20 minutes"
    enter(card.controls["text"])
    assert rec.calls == [([], "about 20 minutes", False)]


def test_several_lines_swaps_in_a_text_area_that_keeps_the_text() -> None:
    card, rec = make("text")
    one, many = card.controls["text"], card.controls["text_lines"]
    assert isinstance(many, widgets.Textarea) and many.layout.display == "none"
    one.value = "第一行"
    card.controls["lines"].value = True
    assert one.layout.display == "none" and many.layout.display is None
    assert many.value == "第一行"
    many.value = "第一行\n  second line  "
    card.submit_button.click()
    assert rec.calls == [([], "第一行\n  second line  ", False)]


def test_number_is_text_and_sends_the_raw_input_once_it_reads_as_a_number() -> None:
    card, rec = make("number")
    number = card.controls["number"]
    assert type(number) is widgets.Text
    assert number.placeholder == "number"
    number.value = "twelve"
    assert card.submit_button.disabled and "Type a number" in card.hint.value
    number.value = " 12.5 "
    assert card.hint.value == ""
    enter(number)
    # Sent without the spaces typed around it: the coordinator accepts only a plain number.
    assert rec.calls == [([], "12.5", False)]


def test_number_is_sent_without_the_spaces_typed_around_it() -> None:
    # The coordinator accepts only a plain number, so the form never sends " 7 ".
    card, rec = make("number")
    card.controls["number"].value = " 7 \n"
    card.submit_button.click()
    assert rec.calls == [([], "7", False)]


def test_date_is_sent_as_iso() -> None:
    card, rec = make("date")
    picker = card.controls["date"]
    assert isinstance(picker, widgets.DatePicker)
    assert card.submit_button.disabled
    picker.value = datetime.date(2024, 2, 9)
    card.submit_button.click()
    assert rec.calls == [([], "2024-02-09", False)]


def test_directory_offers_existing_folders_and_says_when_one_is_new(tmp_path) -> None:
    for folder in ("data/raw", "data/clean", "src", ".git/objects", "__pycache__"):
        (tmp_path / folder).mkdir(parents=True)
    card = AskUserCard(payload("directory"), workspace_hint=str(tmp_path))
    combo = card.controls["directory"]
    assert isinstance(combo, widgets.Combobox) and not combo.ensure_option
    assert list(combo.options) == ["data", "data/clean", "data/raw", "src"]
    combo.value = "data/raw"
    assert "is an existing folder" in card.folder_note.value
    combo.value = "results/new"
    assert "“results/new” does not exist yet: it will be a new folder." in card.folder_note.value
    assert not card.submit_button.disabled  # a new folder is a valid answer


def test_directory_hints_at_relative_path_and_workspace() -> None:
    rec = Recorder()
    card = AskUserCard(payload("directory"), on_submit=rec, workspace_hint="course/<week1>")
    assert isinstance(card.controls["directory"], widgets.Text)
    text = text_of(card)
    assert "relative to the notebook" in text
    assert "course/&lt;week1&gt;" in text
    card.controls["directory"].value = "data/raw"
    card.submit_button.click()
    assert rec.calls == [([], "data/raw", False)]


@pytest.mark.parametrize("mode", ["single", "multiple", "toggle"])
def test_allow_custom_adds_other_field_for_option_modes(mode: str) -> None:
    assert "custom" in make(mode, allow_custom=True)[0].controls
    assert "custom" not in make(mode)[0].controls


@pytest.mark.parametrize("mode", ["text", "number", "date", "directory"])
def test_allow_custom_adds_nothing_for_value_modes(mode: str) -> None:
    assert "custom" not in make(mode, allow_custom=True)[0].controls


def test_submit_label_from_payload() -> None:
    card, _ = make("single", submit_label="继续")
    assert card.submit_button.description == "继续"


def camel_case_era(body: dict[str, Any]) -> dict[str, Any]:
    body = dict(body)
    body["toolCallId"] = body.pop("tool_call_id")
    return body


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({**payload("single"), "mode": "slider"}, "mode"),
        (payload("single", options=[{"id": "a", "label": "A"}, {"label": "x"}]), "options.1.id"),
        (camel_case_era(payload("single")), "tool_call_id"),
    ],
)
def test_a_payload_that_is_not_an_ask_user_payload_is_shown_as_such(
    body: dict[str, Any], where: str
) -> None:
    # The card reads the coordinator's one model (AskUserPayload); what does not validate is
    # never half-drawn as a form that could send an answer.
    rec = Recorder()
    card = AskUserCard(body, on_submit=rec)
    assert card.state == "not_resumable" and card.controls == {}
    [receipt] = with_class(card, "dt-ask-receipt")
    assert "cannot be shown" in receipt.value and where in receipt.value
    card.submit_button.click()
    assert rec.calls == []


def test_the_card_takes_the_typed_payload_itself() -> None:
    question = AskUserPayload.model_validate(payload("multiple", allow_custom=True))
    card = AskUserCard(question)
    assert card.question is question and card.options == question.options
    assert "custom" in card.controls and card.session_id == "sess-1"


def test_expires_at_is_shown() -> None:
    card, _ = make("text", expires_at=ANSWERED_AT + 600)
    assert local_time(ANSWERED_AT + 600) in text_of(card)


# escaping ---------------------------------------------------------------------------------------


def test_model_strings_are_escaped_in_html() -> None:
    evil = "<script>alert(1)</script>"
    options = [{"id": "x", "label": evil, "description": evil}]
    card, _ = make("single", title=evil, description=evil, options=options)
    html_values = [w.value for w in walk(card) if isinstance(w, (widgets.HTML, widgets.HTMLMath))]
    assert all("<script>" not in value for value in html_values)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in card.title.value
    # Control labels are plain text in the browser, so they keep the raw characters.
    assert card.controls["choice"].options[0][0] == f"{evil} — {evil}"
    assert not any(getattr(w, "description_allow_html", False) for w in walk(card) if w is not card)


def test_code_and_latex_in_descriptions_are_typeset_not_shown_raw() -> None:
    options = [
        {"id": "eig", "label": "Eigen", "description": "call `np.linalg.eig` on $A$"},
        {"id": "plain", "label": "Plain", "description": "by hand"},
    ]
    card, _ = make("single", description="Solve $Av = \\lambda v$ with `numpy`", options=options)
    # A plain-text radio label would show the backticks and dollars: the label keeps the name.
    assert [label for label, _ in card.controls["choice"].options] == ["Eigen", "Plain — by hand"]
    notes = with_class(card, "dt-ask-notes")
    assert len(notes) == 1 and isinstance(notes[0], widgets.HTMLMath)
    assert "<b>Eigen</b> — call <code>np.linalg.eig</code> on $A$" in notes[0].value
    assert "Plain" not in notes[0].value  # said in its own label already
    described = with_class(card, "dt-ask-description")
    assert isinstance(described[0], widgets.HTMLMath)
    assert "$Av = \\lambda v$ with <code>numpy</code>" in described[0].value


# cancel and double submission ------------------------------------------------------------------


def test_cancel_sends_cancelled_and_locks() -> None:
    card, rec = make("single", allow_custom=True)
    card.controls["choice"].value = "safe"
    card.controls["custom"].value = "ignored"
    card.cancel_button.click()
    assert rec.calls == [([], "", True)]
    assert card.state == "submitted"
    card.submit_button.click()
    card.cancel_button.click()
    assert len(rec.calls) == 1


def test_no_double_submit_and_controls_locked() -> None:
    card, rec = make("multiple", allow_custom=True)
    card.controls["checks"]["safe"].value = True
    card.submit_button.click()
    card.submit_button.click()
    card.cancel_button.click()
    assert rec.calls == [(["safe"], "", False)]
    assert card.submit_button.disabled and card.cancel_button.disabled
    assert all(box.disabled for box in card.controls["checks"].values())
    assert card.controls["custom"].disabled
    assert "Sending" in card.hint.value


def test_no_callback_still_locks() -> None:
    card = AskUserCard(payload("multiple"))
    card.controls["checks"]["skip"].value = True
    card.submit_button.click()
    assert card.state == "submitted"
    assert card.submit_button.disabled


def test_failing_callback_is_shown_and_reopens() -> None:
    def boom(_s: list[str], _c: str, _x: bool) -> None:
        raise RuntimeError("store is read-only")

    card = AskUserCard(payload("multiple"), on_submit=boom)
    card.controls["checks"]["skip"].value = True
    card.submit_button.click()
    assert "store is read-only" in card.error.value
    assert card.state == "open"
    assert not card.submit_button.disabled


# show_error ------------------------------------------------------------------------------------


def test_show_error_reopens_the_form_and_a_fixed_value_clears_it() -> None:
    card, rec = make("number")
    card.controls["number"].value = "1e999"
    card.submit_button.click()
    assert rec.calls == []  # not a finite number: refused before sending
    card.controls["number"].value = "-3"
    card.submit_button.click()
    card.show_error("Must be positive: <-3>")
    assert card.state == "open"
    assert "Must be positive: &lt;-3&gt;" in card.error.value
    assert card.error in shown(card)
    assert not card.controls["number"].disabled
    assert not card.submit_button.disabled and not card.cancel_button.disabled
    card.controls["number"].value = "12"
    assert card.error.value == ""  # the error belonged to the old value
    card.submit_button.click()
    assert rec.calls == [([], "-3", False), ([], "12", False)]


def test_show_error_reapplies_the_gate() -> None:
    card, _ = make("toggle")
    card.controls["toggles"]["safe"].value = True
    card.submit_button.click()
    card.show_error("try again")
    card.controls["toggles"]["safe"].value = False
    assert card.submit_button.disabled


def test_show_error_keep_disabled_is_final() -> None:
    card, rec = make("single")
    card.controls["choice"].value = "safe"
    card.submit_button.click()
    card.show_error("That request was already answered.", keep_disabled=True)
    assert "already answered" in card.error.value
    assert card.submit_button.disabled and card.controls["choice"].disabled
    card.submit_button.click()
    assert len(rec.calls) == 1


# receipts -------------------------------------------------------------------------------------


def test_receipt_shows_labels_custom_text_and_time() -> None:
    card, _ = make("multiple", allow_custom=True)
    card.submit_button.click()
    card.show_receipt(["safe", "ghost"], "注意 <i>this</i>\n🙂", ANSWERED_AT)
    assert card.state == "answered"
    [receipt] = with_class(card, "dt-ask-receipt")
    assert "Analyse first" in receipt.value
    assert "★" not in receipt.value
    assert "ghost" in receipt.value  # unknown ids are shown as ids
    assert "safe" not in receipt.value
    assert "注意 &lt;i&gt;this&lt;/i&gt;\n🙂" in receipt.value
    assert local_time(ANSWERED_AT) in receipt.value
    assert "Answered at " in receipt.value and "the tutor continues…" in receipt.value
    assert card.title in shown(card)
    assert card.submit_button not in shown(card)
    assert card.cancel_button not in shown(card)


def test_receipt_done_status_and_value_mode() -> None:
    card, _ = make("date")
    card.show_receipt([], "2024-02-09", ANSWERED_AT, status="done")
    text = text_of(card)
    assert "Your answer: " in text and "2024-02-09" in text
    assert text.count("nswered") == 1 and "continues" not in text  # said once


def test_receipt_with_nothing_chosen() -> None:
    card, _ = make("multiple")
    card.show_receipt([], "", ANSWERED_AT)
    assert "No option chosen." in text_of(card)


def test_cancelled_receipt() -> None:
    card, rec = make("single")
    card.cancel_button.click()
    card.show_cancelled(ANSWERED_AT)
    assert card.state == "cancelled"
    [receipt] = with_class(card, "dt-ask-receipt")
    assert "Cancelled" in receipt.value and local_time(ANSWERED_AT) in receipt.value
    assert card.submit_button not in shown(card)
    assert rec.calls == [([], "", True)]


def test_expired_receipt_keeps_title_and_sends_nothing() -> None:
    card, rec = make("single")
    card.controls["choice"].value = "safe"
    card.show_expired()
    assert card.state == "expired"
    assert card.title in shown(card)
    [receipt] = with_class(card, "dt-ask-receipt")
    assert "Timed out: this question was not answered in time." in receipt.value
    assert card.submit_button not in shown(card)
    card.submit_button.click()
    card.cancel_button.click()
    assert rec.calls == []


def test_not_resumable_payload_renders_message_only() -> None:
    card, rec = make("single", resumable=False)
    assert card.state == "not_resumable"
    assert card.controls == {}
    assert card.children[0] is card.title
    [receipt] = with_class(card, "dt-ask-receipt")
    assert "The kernel restarted; this question can no longer continue." in receipt.value
    assert card.submit_button not in shown(card)
    assert card.cancel_button not in shown(card)
    assert "It changes which tools I use." not in text_of(card)
    card.submit_button.click()
    card.cancel_button.click()
    assert rec.calls == []


def test_show_not_resumable_on_an_open_card() -> None:
    card, rec = make("text")
    card.controls["text"].value = "hi"
    card.show_not_resumable()
    assert card.state == "not_resumable"
    assert card.submit_button not in shown(card)
    card.submit_button.click()
    assert rec.calls == []


def test_show_error_after_a_receipt_only_adds_the_line() -> None:
    card, _ = make("single")
    card.show_expired()
    card.show_error("late answer rejected")
    assert card.state == "expired"
    assert card.error in shown(card)
    assert card.submit_button not in shown(card)


# Chinese ---------------------------------------------------------------------------------------


def test_chinese_strings() -> None:
    card, _ = make("single", language="zh", allow_custom=True)
    assert card.submit_button.description == "提交"
    assert card.cancel_button.description == "取消"
    assert card.controls["custom"].description == "其他说明"
    assert card.controls["choice"].options[0][0] == "Analyse first  ★ 推荐 — read only"
    card.show_receipt(["safe"], "", ANSWERED_AT)
    assert "导师继续中…" in text_of(card)

    cancelled, _ = make("single", language="zh")
    cancelled.show_cancelled(ANSWERED_AT)
    assert "已取消" in text_of(cancelled)
    expired, _ = make("single", language="zh")
    expired.show_expired()
    assert "已超时" in text_of(expired)
    gone, _ = make("single", language="zh", resumable=False)
    assert "内核已重启，这个问题无法继续。请重新发起任务。" in text_of(gone)


def test_string_tables_match() -> None:
    tables = ask_user_strings.TEXTS
    assert set(tables["en"]) == set(tables["zh"])
    assert s("submit", "fr") == "Submit"
    assert s("no-such-key") == "no-such-key"


def test_local_time_is_local_and_names_its_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    shown_time = time.strftime("%Y-%m-%d %H:%M", time.localtime(ANSWERED_AT))
    assert local_time(ANSWERED_AT).startswith(shown_time + " UTC")
    # POSIX zone strings (the sign is inverted there), so no tz database is needed.
    for zone, expected in [
        ("CST-8", "2023-11-15 06:13 UTC+8"),
        ("IST-5:30", "2023-11-15 03:43 UTC+5:30"),
        ("EST+5", "2023-11-14 17:13 UTC-5"),
        ("UTC0", "2023-11-14 22:13 UTC"),
    ]:
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        assert local_time(ANSWERED_AT) == expected
    monkeypatch.undo()
    time.tzset()


def test_toggle_state_is_obvious() -> None:
    card, _ = make("toggle")
    button = card.controls["toggles"]["safe"]
    assert (button.button_style, button.icon) == ("", "square-o")
    button.value = True
    assert (button.button_style, button.icon) == ("info", "check-square")
    button.value = False
    assert button.button_style == ""
