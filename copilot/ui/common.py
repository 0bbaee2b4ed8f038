"""Small helpers shared by the tabs: who the user is, and text made safe for HTML."""

from __future__ import annotations

import html
import logging
import re
import tempfile
from pathlib import Path

import gradio as gr

from copilot.features.limits import check_rate
from copilot.readable import readable
from copilot.records import is_document
from copilot.services import Services

log = logging.getLogger(__name__)

LOCAL_USER = "local"


class SignInError(gr.Error):
    """The Hugging Face sign-in of this session could not be read: refused, never mapped to the local user."""


def current_user(request: gr.Request | None) -> str:
    """The logged-in user (COPILOT_AUTH password login, or Hugging Face OAuth), else (an app without either) the
    single local user. Raises SignInError in an app with Hugging Face sign-in when the visitor has not signed in,
    or their sign-in is expired or unreadable."""
    if request is None:
        return LOCAL_USER
    username = getattr(request, "username", None)
    if username:
        return str(username)
    oauth_name = _oauth_username(request)
    return f"hf:{oauth_name}" if oauth_name else LOCAL_USER


SIGN_IN_FIRST = ("Sign in with Hugging Face (the button at the top) to use Research Copilot: your profile, "
                 "questions and votes are kept under your account.")


def _oauth_username(request: gr.Request) -> str | None:
    """The Hugging Face account of a session logged in through gr.LoginButton; None when the app has no OAuth
    (no session middleware). In an app with OAuth (a Space) a visitor who has not signed in is asked to: they
    would otherwise share the one local user, its profile and questions, with every other visitor."""
    try:
        session = request.session
    except (AssertionError, AttributeError):   # starlette asserts the middleware; a detached request has no session
        return None
    try:
        if session.get("oauth_info") is None:       # an app with Hugging Face sign-in, and nobody signed in
            raise SignInError(SIGN_IN_FIRST)
        from gradio.oauth import _get_valid_oauth_info_from_session

        info = _get_valid_oauth_info_from_session(session)
        if info is None:
            raise SignInError("Your Hugging Face sign-in has expired. Sign in again to use your own profile, "
                              "questions and votes.")
        name = (info.get("userinfo") or {}).get("preferred_username")
    except SignInError:
        raise
    except Exception as error:
        log.warning("Hugging Face sign-in unreadable: %s: %s", type(error).__name__, error)
        raise SignInError("Your Hugging Face sign-in could not be read. Sign out and sign in again.") from None
    if not isinstance(name, str) or not name.strip():
        log.warning("Hugging Face sign-in without a user name")
        raise SignInError("Your Hugging Face sign-in did not say which account you are. Sign out and sign in "
                          "again.")
    return name


def rate_scope(request: gr.Request, user: str) -> str | None:
    """What the rate limit counts besides the user: nothing for a signed-in user, so all their sessions share
    one budget (a session id is chosen by the client: a fresh one per request bypassed a per-session limit); the
    client's address for the local user, who has no account."""
    if user != LOCAL_USER:
        return None
    client = getattr(request, "client", None)
    return getattr(client, "host", None) or "unknown client"


def user_within_rate(services: Services, request: gr.Request | None, action: str) -> str:
    """The current user, once their rate limit (per account, or per client for the local user) allows one more
    `action`; raises RateLimited (a UserError) when it does not."""
    user = current_user(request)
    check_rate(services, user, rate_scope(request, user) if request is not None else None, action)
    return user


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]()!#~|])")


def escape_markdown(text: object) -> str:
    """User or model text for a gr.Markdown: shown as written, never as markup (no image, link or emphasis)."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", escape(text))


def arxiv_link(paper_id: str, title: str | None = None) -> str:
    label = escape(readable(title) or paper_id)
    if is_document(paper_id):          # a researcher's own upload: on no server but this one, linked nowhere
        return f'<span class="doc-ref">{label}</span>'
    return f'<a href="https://arxiv.org/abs/{escape(paper_id)}" target="_blank" rel="noopener">{label}</a>'


def shown_file(path: str | list[str] | None) -> dict:
    """A download box's update: the file (or files), or the box hidden (a page shows no empty file box)."""
    return gr.update(value=path, visible=path is not None)


def write_download(text: str, name: str, suffix: str) -> str | None:
    """Text in a temporary file named after `name` with `suffix` ("bib", "csv", "md"), for a download (None when
    there is nothing to write)."""
    if not (text or "").strip():
        return None
    stem = "".join(c if c.isalnum() else "-" for c in (name or "papers").lower())[:50].strip("-") or "papers"
    path = Path(tempfile.mkdtemp(prefix=f"copilot-{suffix}-")) / f"{stem}.{suffix}"
    path.write_text(text.rstrip() + "\n", encoding="utf-8")
    return str(path)


def write_bibtex(bibtex: str, name: str) -> str | None:
    """BibTeX in a temporary .bib file, for a download (None when there is nothing to write)."""
    return write_download(bibtex, name, "bib")
