"""Screenshot of the seed-case status comment as GitHub shows it, for the README.

The comment is the golden file the test suite keeps equal to the renderer's output
(tests/golden/seed_case.md). It is rendered with cmark-gfm and GitHub's extensions, styled
like a GitHub pull-request comment (inline CSS, no network) and photographed by Debian's
headless chromium (`apt-get install -y chromium fonts-noto-color-emoji`).

    python scripts/render_comment_screenshot.py [--input GOLDEN.md] [--output PNG] [--width PX]
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = ROOT / "tests" / "golden" / "seed_case.md"
DEFAULT_OUTPUT = ROOT / "docs" / "img" / "comment-seed-case.png"

# The parts of GitHub's markdown-body and timeline-comment styles the comment uses (light theme).
CSS = """
html { background: #ffffff; }
body { margin: 0; padding: 16px; font-family: -apple-system, BlinkMacSystemFont, "Segoe UI",
  "Noto Sans", Helvetica, Arial, "Liberation Sans", sans-serif, "Noto Color Emoji";
  font-size: 14px; line-height: 1.5; color: #1f2328; }
.comment { border: 1px solid #d1d9e0; border-radius: 6px; max-width: 100%; }
.header { display: flex; align-items: center; gap: 8px; padding: 8px 16px;
  background: #f6f8fa; border-bottom: 1px solid #d1d9e0; border-radius: 6px 6px 0 0;
  color: #59636e; }
.avatar { width: 20px; height: 20px; border-radius: 50%; background: #6e7781; }
.header b { color: #1f2328; font-weight: 600; }
.label { border: 1px solid #d1d9e0; border-radius: 2em; padding: 0 7px; font-size: 12px;
  font-weight: 500; line-height: 18px; }
.markdown-body { padding: 16px; word-wrap: break-word; }
.markdown-body > *:first-child { margin-top: 0 !important; }
.markdown-body > *:last-child { margin-bottom: 0 !important; }
.markdown-body h3 { margin: 24px 0 16px; font-size: 1.25em; font-weight: 600; line-height: 1.25; }
.markdown-body p, .markdown-body ul, .markdown-body details { margin: 0 0 16px; }
.markdown-body ul { padding-left: 2em; }
.markdown-body li + li { margin-top: .25em; }
.markdown-body a { color: #0969da; text-decoration: none; }
.markdown-body code { padding: .2em .4em; margin: 0; font-size: 85%; white-space: break-spaces;
  background: rgba(129,139,152,0.12); border-radius: 6px;
  font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono",
  "DejaVu Sans Mono", monospace, "Noto Color Emoji"; }
.markdown-body summary { cursor: pointer; display: list-item; }
"""

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>ci-status-bot comment</title>
<style>{css}</style></head>
<body><div class="comment" id="comment">
<div class="header"><span class="avatar"></span><b>ci-status-bot</b><span class="label">bot</span>
<span>commented</span></div>
<div class="markdown-body">
{body}
</div></div>
<script>
document.fonts.ready.then(() => {{
  const box = document.getElementById("comment").getBoundingClientRect();
  document.title = "height=" + Math.ceil(box.bottom + 16);
}});
</script>
</body></html>
"""


def comment_html(markdown: str) -> str:
    """The comment as GitHub renders it: cmark-gfm, GitHub's extensions, HTML comments hidden."""
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    return re.sub(r"<!--.*?-->\n?", "", rendered, flags=re.S)


def chromium() -> str:
    """The headless browser's path."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("chromium not found: apt-get update && apt-get install -y chromium")


def _browser(*args: str) -> str:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=2", *args]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def screenshot(page: Path, output: Path, *, width: int) -> None:
    """Photograph the page at the given width, exactly as tall as its content."""
    # the page measures itself once its fonts are in; virtual time lets that happen first
    dom = _browser(
        f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()
    )
    match = re.search(r"<title>height=(\d+)", dom)
    height = int(match.group(1)) if match else 800
    output.parent.mkdir(parents=True, exist_ok=True)
    _browser(f"--window-size={width},{height}", f"--screenshot={output}", page.as_uri())


def main() -> int:
    """Render the golden comment to HTML and screenshot it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--width", type=int, default=760)
    parser.add_argument("--html", type=Path, help="also keep the HTML page here")
    args = parser.parse_args()
    body = comment_html(args.input.read_text(encoding="utf-8"))
    # a fixed width: headless chromium lays a page out at least 500 px wide when measuring
    css = CSS + f"\n.comment {{ width: {args.width - 34}px; }}"
    page = PAGE.format(css=css, body=body)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "comment.html"
        path.write_text(page, encoding="utf-8")
        if args.html:
            args.html.write_text(page, encoding="utf-8")
        screenshot(path, args.output, width=args.width)
    print(f"wrote {args.output} from {args.input} ({html.escape(str(args.width))} px wide)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
