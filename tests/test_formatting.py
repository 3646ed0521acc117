"""``formatting.describe_metadata``: a batch's metadata on one line, as the batches list (the
dashboard's and ``flask solidq batches``) shows it."""

from __future__ import annotations

from flask_solidq import formatting


def test_a_label_is_shown_alone():
    assert formatting.describe_metadata({"label": "catalog", "owner": "ops"}) == "catalog"


def test_other_metadata_is_shown_as_json_values_by_key():
    shown = formatting.describe_metadata({"owner": "ops", "size": 2, "tags": ["a"], "x": None})

    assert shown == 'owner="ops", size=2, tags=["a"], x=null'


def test_no_metadata_is_empty_and_an_empty_label_is_not_a_label():
    assert formatting.describe_metadata({}) == ""
    assert formatting.describe_metadata({"label": ""}) == 'label=""'


def test_a_long_or_multiline_summary_is_one_shortened_line():
    shown = formatting.describe_metadata({"label": "line one\nline two " + "x" * 100})

    assert shown.startswith("line one line two xxx")
    assert len(shown) == formatting.METADATA_WIDTH and shown.endswith("…")
