"""Settings: read from the environment, clear messages for bad values; docs that cannot drift."""

from __future__ import annotations

import base64
import re
import tempfile
from pathlib import Path

import pytest

from copilot.cli import build_parser
from copilot.config import SettingsError, load_settings, settings_table
from copilot.secrets import mask_secret
from tests import helpers
from tests.helpers import ROOT


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    helpers.clean_env(monkeypatch, "COPILOT_CATEGORIES")


def test_defaults_pick_local_model_without_key():
    settings = load_settings()
    assert settings.llm_backend == "local"
    assert settings.categories == ["cs.CL", "cs.AI", "cs.LG", "cs.IR"]
    assert (settings.server_name, settings.server_port) == ("127.0.0.1", 7860)


def test_key_selects_openai_and_stays_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    settings = load_settings()
    assert settings.llm_backend == "openai"
    assert "sk-test-secret-123" not in repr(settings)


def test_categories_from_comma_list(monkeypatch):
    monkeypatch.setenv("COPILOT_CATEGORIES", " cs.CL , stat.ML ")
    assert load_settings().categories == ["cs.CL", "stat.ML"]


@pytest.mark.parametrize("name, value, fragment", [
    ("COPILOT_LLM", "gpt", "COPILOT_LLM"),
    ("COPILOT_TOP_K", "many", "COPILOT_TOP_K"),
    ("COPILOT_INGEST_CRON", "every day", "crontab"),
    ("GRADIO_SERVER_PORT", "99999", "GRADIO_SERVER_PORT"),
    ("COPILOT_LOCAL_MODEL", "/nowhere/model.gguf", "no GGUF file"),
    ("COPILOT_CATEGORIES", " , ", "at least one"),
])
def test_bad_values_name_the_variable(monkeypatch, name, value, fragment):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=fragment):
        load_settings()


def test_openai_without_key_says_how_to_fix(monkeypatch):
    monkeypatch.setenv("COPILOT_LLM", "openai")
    with pytest.raises(SettingsError, match="set OPENAI_API_KEY or use COPILOT_LLM=local"):
        load_settings()


README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _block(text: str, name: str) -> str:
    return text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return list(sub.choices)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    if "<!-- settings:start -->" in text:
        # The generated table's descriptions come from copilot/config.py, written for a page at the root.
        text = text.replace(_block(text, "settings"), "")
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def test_settings_table_matches_settings():
    block = _block((DOCS / "configuration.md").read_text(encoding="utf-8"), "settings")
    assert block.strip() == settings_table().strip(), \
        "regenerate the table in docs/configuration.md from copilot.config.settings_table()"


def test_readme_settings_are_settings_with_their_defaults():
    generated = {row.split(" | ")[0]: row.split(" | ")[1] for row in settings_table().splitlines()[2:]}
    rows = _block(README.read_text(encoding="utf-8"), "top-settings").strip().splitlines()[2:]
    assert len(rows) == 10
    for row in rows:
        variable, default = row.split(" | ")[:2]
        assert variable in generated, f"README shows {variable}, which is no setting"
        assert default == generated[variable], f"README shows {variable} with default {default}"


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = "python3 -m pytest -q tests"
    assert command in README.read_text(encoding="utf-8") and ci.rstrip().endswith(command)


def test_cli_reference_shows_every_command():
    reference = (DOCS / "cli.md").read_text(encoding="utf-8")
    missing = [name for name in _commands() if f"python -m copilot {name}" not in reference]
    assert not missing, f"docs/cli.md does not show: {missing}"


def test_readme_names_every_command():
    readme = README.read_text(encoding="utf-8")
    missing = [name for name in _commands() if f"`{name}`" not in readme]
    assert not missing, f"README does not name: {missing}"


def test_readme_is_a_front_door_with_the_spaces_front_matter():
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    front = readme.split("---\n")[1]
    assert {"sdk: docker", "app_port: 7860", "hf_oauth: true"} <= set(front.splitlines())
    assert "pip install -r requirements.txt && python app.py" in readme and "bash .ci/run" in readme


def test_every_link_of_the_readme_and_the_docs_resolves():
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in _links(page):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.is_file():
                broken.append(f"{page.name}: {target}")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert not broken, broken


def test_the_readme_links_each_docs_page_once_and_every_page_is_reached():
    from_readme = [t.partition("#")[0] for t in _links(README) if t.startswith("docs/")]
    assert len(from_readme) == len(set(from_readme)), f"linked twice from the README: {from_readme}"
    reached, todo = set(), [(ROOT / t).resolve() for t in from_readme]
    while todo:
        page = todo.pop()
        if page in reached or page.suffix != ".md":
            continue
        reached.add(page)
        todo += [(page.parent / t.partition("#")[0]).resolve() for t in _links(page) if t.partition("#")[0]]
    orphans = sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in reached)
    assert not orphans, f"no link leads from the README to: {orphans}"


def test_cli_help_renders_for_every_command():
    parser = build_parser()
    assert "Research Copilot" in parser.format_help()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        assert command.format_help(), name


MASKED_KEY = "sk-test-2b7e151628aed2a6abf7158809cf4f3c"


@pytest.mark.parametrize("form", [
    MASKED_KEY, MASKED_KEY.upper(), MASKED_KEY[::-1], " ".join(MASKED_KEY), "-".join(MASKED_KEY),
    "\\n".join(MASKED_KEY),
    base64.b64encode(MASKED_KEY.encode()).decode(), base64.b64encode(f"Bearer {MASKED_KEY}".encode()).decode(),
    base64.urlsafe_b64encode(f"k={MASKED_KEY}".encode()).decode(), MASKED_KEY.encode().hex()])
def test_mask_secret_hides_every_echoed_form(form):
    shown = mask_secret(f"provider said: {form} (400)", MASKED_KEY)
    # all of the form is gone but for a few characters a base64 text shares with its neighbours ("Bearer ", "=")
    assert shown.startswith("provider said: ") and shown.endswith(" (400)") and "***" in shown
    assert len(shown) - len("provider said:  (400)") - len("***") <= 12, shown


def test_mask_secret_leaves_other_text_alone():
    text = "the model sk-test was refused: 400 bad request, see https://example.org/keys?id=2b7e"
    assert mask_secret(text, MASKED_KEY) == text
    assert mask_secret("short key abc123 here", "abc123") == "short key *** here"
    assert mask_secret("a b c 1 2 3", "abc123") == "a b c 1 2 3"     # a short secret: only as written


def test_a_secret_split_across_streamed_pieces_is_masked_as_the_whole_text_would_be():
    import base64
    import random

    from copilot.secrets import StreamMask

    key = "sk-stream-0123456789abcdefXYZ"
    text = (f"key {key}, reversed {key[::-1]}, base64 {base64.b64encode(key.encode()).decode()}, spaced "
            f"{' '.join(key)}, and a long tail of ordinary words " * 2)
    chooser = random.Random(7)
    for _ in range(200):
        mask, shown, at = StreamMask(key), [], 0
        while at < len(text):
            size = chooser.randint(1, 9)
            shown.append(mask.feed(text[at:at + size]))
            at += size
        shown.append(mask.flush())
        assert "".join(shown) == mask_secret(text, key) and not any(key in piece for piece in shown)


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in text)


@pytest.mark.parametrize("form", [
    "    ".join(MASKED_KEY),                                       # 4-space gaps (a page shows one space)
    MASKED_KEY[:20] + " … and the rest: " + MASKED_KEY[20:],      # split in halves
    "".join(f"&#{ord(c)};" for c in MASKED_KEY), "".join(f"&#x{ord(c):x};" for c in MASKED_KEY),   # HTML entities
    _fullwidth(MASKED_KEY)])
def test_mask_secret_hides_the_forms_a_page_turns_back_into_the_key(form):
    """Issue #34: forms that passed the mask and showed as the key on the page."""
    import html
    import unicodedata

    shown = mask_secret(f"provider said: {form} (400)", MASKED_KEY)
    on_page = " ".join(unicodedata.normalize("NFKC", html.unescape(shown)).split())
    assert "***" in shown and MASKED_KEY not in on_page and MASKED_KEY[:RUN_OF_KEY] not in on_page
    assert MASKED_KEY[-RUN_OF_KEY:] not in on_page


RUN_OF_KEY = 12


def test_the_new_forms_are_masked_in_streamed_pieces_as_in_the_whole_text():
    import random

    from copilot.secrets import StreamMask

    text = (f"spaced {'    '.join(MASKED_KEY)}, halves {MASKED_KEY[:20]} then {MASKED_KEY[20:]}, "
            f"entities {''.join(f'&#{ord(c)};' for c in MASKED_KEY)}, and ordinary words after it. ")
    chooser = random.Random(3)
    for _ in range(30):
        mask, shown, at = StreamMask(MASKED_KEY), [], 0
        while at < len(text):
            size = chooser.randint(1, 9)
            shown.append(mask.feed(text[at:at + size]))
            at += size
        shown.append(mask.flush())
        assert MASKED_KEY[:RUN_OF_KEY] not in "".join(shown) and "ordinary words after it" in "".join(shown)


def test_a_childs_data_dir_must_be_an_absolute_temporary_path(tmp_path):
    """#58 item 8: a `(dir, n)` tuple's text as COPILOT_DATA_DIR made the app write its data into the repository."""
    from tests.helpers import subprocess_env, temporary_data_dir

    assert subprocess_env(tmp_path / "data")["COPILOT_DATA_DIR"] == str(tmp_path / "data")
    for bad in (str((tmp_path / "data", {0, 2})), "copilot-data", str(ROOT / "copilot-data"), "/etc/copilot",
                f"{tempfile.gettempdir()}/../{ROOT.relative_to(ROOT.anchor)}"):
        with pytest.raises(ValueError, match="COPILOT_DATA_DIR"):
            temporary_data_dir(bad)
