"""python -m bot: the same as the ci-status-bot command."""

import sys

# httpcore imports trio, where it is installed (the test extra's selenium brings it), to serve
# async code running under trio; the bot's HTTP clients are synchronous and its server runs on
# asyncio, so a bot process never imports it (~80 ms of CPU at every start).
sys.modules.setdefault("trio", None)  # type: ignore[arg-type]

from bot.cli import main  # noqa: E402

raise SystemExit(main())
