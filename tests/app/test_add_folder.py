"""Add a folder on the Corpus page, in chromium: a folder of markdown files (most without frontmatter) is checked,
shown, ingested into its own collection and made the current corpus, then looked up; a bad path is named in a clear
error; a read-only app does not offer it. The app as in test_browser, against the session's embedded Weaviate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from ..helpers.browser import (
    alert,
    assert_no_exception,
    column,
    metric_values,
    open_connected,
    open_page,
    rerun,
    shot,
    start_app,
    type_query,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTES = {
    "billing/currency-rounding.md": "# Currency rounding errors\n\nInvoices in yen and won come out one unit off: the "
    "totals are rounded half-up per line instead of half-even on the sum, so the ledger and the invoice disagree.\n",
    "billing/refund-delays.md": "# Refund delays\n\nRefunds stay pending for more than five business days when the "
    "payment processor holds the settlement batch. Check the processor's batch status before re-issuing.\n",
    "shipping/customs-forms.md": "# Customs declaration forms rejected\n\nThe carrier rejects parcels whose customs "
    "form lacks a harmonized tariff code. Add the HS code to the product record and print the form again.\n",
    "shipping/label-printer.md": "---\ntitle: Label printer offline\ntags: [zebra, printer]\n---\nThe warehouse label "
    "printer drops off the network after a power cut; give it a fixed address on the print server.\n",
    "shipping/broken.md": "---\ntitle: {a: 1}\n---\nA title that is a mapping.\n",
}


def write_notes(root: Path) -> Path:
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def check_folder(page, path: str) -> None:
    box = page.get_by_label("Folder path", exact=True)
    box.fill(path)
    rerun(page, lambda: page.get_by_role("button", name="Check folder").click())


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_add_a_folder_ingest_it_and_find_its_entry(page, tmp_path_factory, base_settings, weaviate_client, width, height):
    tmp = tmp_path_factory.mktemp("app-add-folder")
    name = f"billing-notes-{width}"  # its own collection in the session's Weaviate: each width ingests anew
    folder = write_notes(tmp / "kb" / name)
    app = start_app(tmp, base_settings, collection="TestSample")
    try:
        page.set_viewport_size({"width": width, "height": height})
        open_connected(page, app, "corpus")
        expect(page.get_by_text("Add a folder", exact=True)).to_be_visible()

        missing = tmp / "no-such-folder"
        check_folder(page, str(missing))
        expect(alert(page, "This folder cannot be added")).to_contain_text(f"{missing}: no such folder")
        check_folder(page, str(folder / "billing" / "refund-delays.md"))
        expect(alert(page, "This folder cannot be added")).to_contain_text("is a file, not a folder")
        assert_no_exception(page, "add a folder, bad paths")

        check_folder(page, str(folder))
        expect(page.get_by_text("Entries found")).to_be_visible()
        figures = metric_values(page)
        assert (figures["Entries found"], figures["Domains"]) == ("4", "2"), figures
        assert (figures["Without frontmatter"], figures["Files that failed"]) == ("3", "1"), figures
        expect(alert(page, "would be skipped")).to_be_visible()
        expect(page.get_by_text(re.compile(r"broken\.md \(field 'title'\): expected a string")).first).to_be_attached()
        shot(page, f"add-folder-checked-{width}")

        rerun(page, lambda: page.get_by_role("button", name="Ingest 4 entries and use this folder").click())
        assert_no_exception(page, "add a folder, ingest")
        expect(alert(page, "4 added")).to_be_visible()
        expect(page).to_have_url(re.compile(rf"corpus={name}"))
        expect(page.get_by_text(str(folder)).first).to_be_visible()  # the page's caption: the current corpus
        assert metric_values(page)["Entries"] == "4"

        open_page(page, app, f"?corpus={name}")  # the URL alone reopens the folder, in a new session
        type_query(page, "invoice totals one yen off after rounding")
        assert column(page, 0, "entry_id")[0] == "billing/currency-rounding"
        expect(page.get_by_role("heading", name="Currency rounding errors").first).to_be_visible()
        assert_no_exception(page, "lookup in the added folder")
        shot(page, f"add-folder-lookup-{width}")
    finally:
        app.stop()
        for made in [c for c in weaviate_client.collections.list_all() if c.lower().startswith(f"kb_billing_notes_{width}")]:
            weaviate_client.collections.delete(made)


def test_a_read_only_app_offers_no_add_a_folder(page, tmp_path_factory, base_settings, weaviate_client):
    tmp = tmp_path_factory.mktemp("app-add-folder-read-only")
    app = start_app(tmp, base_settings, collection="TestSample", env_extra={"LOOKUP_READ_ONLY": "true"})
    try:
        open_page(page, app, "corpus")
        assert_no_exception(page, "read-only corpus")
        expect(alert(page, "Ingest, Re-index and Reload are off")).to_be_visible()  # the page is drawn
        expect(page.get_by_text("Add a folder", exact=True)).to_have_count(0)
        expect(page.get_by_label("Folder path")).to_have_count(0)
        expect(page.get_by_role("button", name="Check folder")).to_have_count(0)
    finally:
        app.stop()
