"""What a prompt is: a named template whose placeholders are checked when it is rendered, and how source material
is quoted in it. The prompts themselves are in prompts.py, which re-exports these."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass


@dataclass(frozen=True)
class RenderedPrompt:
    name: str
    system: str
    user: str

    def as_messages(self) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": self.user}]

    def as_text(self) -> str:
        return f"[system]\n{self.system}\n[user]\n{self.user}" if self.system else self.user


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str

    @property
    def fields(self) -> set[str]:
        found = set()
        for text in (self.system, self.user):
            found |= {field for _, field, _, _ in string.Formatter().parse(text) if field}
        return found

    def render(self, **values: object) -> RenderedPrompt:
        missing = self.fields - values.keys()
        extra = values.keys() - self.fields
        if missing or extra:
            raise KeyError(f"prompt {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return RenderedPrompt(self.name, self.system.format(**values), self.user.format(**values))


def source_block(item_id: str, text: str) -> str:
    """Quote one item for a prompt; angle brackets inside are neutralised so the block cannot be closed early."""
    safe = text.replace("<", "‹").replace(">", "›")
    return f'<source id="{item_id}">\n{safe}\n</source>'


_QUOTING_TAG = re.compile(r"</?\s*(?:source|script|answer)\b[^>]{0,80}>", re.I)


def strip_quoting_tags(text: str) -> str:
    """Model output without echoed <source …>/<answer> quoting tags (small models copy them from the prompt)."""
    return _QUOTING_TAG.sub(" ", text or "").strip()
