"""Research Copilot: a personalized research assistant over arXiv."""

__version__ = "0.1.0"
