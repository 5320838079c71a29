"""ci-status-bot: one factual CI-status comment per pull request."""

__version__ = "0.1.0"
