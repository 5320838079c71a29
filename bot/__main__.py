"""python -m bot: the same as the ci-status-bot command."""

from bot.cli import console

console()
