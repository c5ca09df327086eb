"""ask_user's seven modes as MCP elicitation forms: every form is valid for the spec's schema of
form fields, and a form's answer comes back as ask_user's submission."""

from __future__ import annotations

import pytest
from mcp.server.elicitation import _validate_rendered_properties

from deeptutor_jupyter.hosts.forms import form_of, submission_of
from deeptutor_jupyter.interaction.answers import check_answer

OPTIONS = [{"id": "a", "label": "Alpha"}, {"id": "b", "label": "Beta"}]
CASES = [
    ("single", OPTIONS, "b", (["b"], "")),
    ("multiple", OPTIONS, ["a", "b"], (["a", "b"], "")),
    ("toggle", OPTIONS, ["a"], (["a"], "")),
    ("text", [], "because", ([], "because")),
    ("number", [], 6.0, ([], "6")),
    ("date", [], "2026-12-05", ([], "2026-12-05")),
    ("directory", [], "data", ([], "data")),
]


@pytest.mark.parametrize(("mode", "options", "value", "expected"), CASES)
def test_each_mode_is_a_valid_form_whose_answer_is_a_submission(
    mode, options, value, expected, tmp_path
):
    payload = {"title": "Q?", "mode": mode, "options": options, "allow_custom": False}
    message, schema = form_of(payload)
    assert message == "Q?"
    _validate_rendered_properties(schema)  # raises for a field the spec does not allow
    selections, text = submission_of(payload, {"answer": value})
    assert (selections, text) == expected
    check_answer(payload, selections, text, tmp_path)  # the coordinator would accept it


def test_allow_custom_adds_an_optional_other_field():
    payload = {"title": "Q?", "mode": "single", "options": OPTIONS, "allow_custom": True}
    _, schema = form_of(payload)
    _validate_rendered_properties(schema)
    assert schema["required"] == [] and "other" in schema["properties"]
    assert submission_of(payload, {"other": "Gamma"}) == ([], "Gamma")
