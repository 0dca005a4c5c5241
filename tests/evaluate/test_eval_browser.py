"""The report page as a real browser renders it (headless Chromium): the verdict's call and the box's colour.

Two reads of each page by Chromium: ``--dump-dom`` of a copy with a probe script appended (the
computed style, the rendered text and the box's place, as the browser laid the page out), and
``--screenshot`` of the page itself, whose pixels inside the box must be the colour of the call.
No browser, no pass: the test fails (it never skips) when Chromium is missing; ``scripts/test.sh``
installs it with apt-get where it can, ``PRIVSYN_CHROMIUM`` names another binary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from PIL import Image

from privsyn_spark.evaluate.report import write_report

from .test_eval_verdict import good_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1200, 1400
COLOURS = {"green": (227, 244, 227), "amber": (253, 235, 200), "red": (250, 220, 220)}  # report.py's CSS

PROBE = """<script>
const box = document.querySelector("div.verdict"), r = box.getBoundingClientRect(), s = getComputedStyle(box);
const out = document.createElement("pre"); out.id = "probe";
out.textContent = JSON.stringify({call: box.dataset.call, text: box.innerText, background: s.backgroundColor,
  border: s.borderTopColor, rect: [r.left, r.top, r.width, r.height], visible: s.display !== "none"});
document.body.appendChild(out);
</script>"""


def browser() -> str:
    found = os.environ.get("PRIVSYN_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if not found:
        pytest.fail("the browser test needs headless Chromium: apt-get install chromium (scripts/test.sh does "
                    "where it may), or set PRIVSYN_CHROMIUM to a Chromium/Chrome binary")
    return found


def chromium(tmp_path, *args: str) -> str:
    done = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--force-device-scale-factor=1", f"--window-size={WIDTH},{HEIGHT}",
                           f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def rgb(css: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", css)[:3])


def reports() -> dict[str, dict]:
    green, amber, red = good_report(), good_report(), good_report()
    amber["metrics"]["values"]["age"]["ks"] = 0.2
    red["metrics"]["tvd"]["tvd_2way_mean"] = 0.079  # 0.99x the independent baseline
    return {"green": green, "amber": amber, "red": red}


@pytest.mark.slow
@pytest.mark.parametrize("colour", ["green", "amber", "red"])
def test_the_browser_shows_the_call_in_its_colour(tmp_path, colour):
    _, page = write_report(reports()[colour], tmp_path / "report")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium(tmp_path, "--dump-dom", probe.as_uri())
    found = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"')
                       .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    call = {"green": "fit for use", "amber": "use with care", "red": "not fit"}[colour]
    assert found["call"] == call and found["visible"]
    assert found["text"].startswith(f"Call: {call}"), found["text"][:200]
    if colour == "amber":
        assert "the KS distance of age is 0.2" in found["text"] and "fit ≤ 0.1, care ≤ 0.3" in found["text"]
    if colour == "red":
        assert "the 2-way TVD is 0.99x the independent-columns baseline's" in found["text"]
    assert rgb(found["background"]) == COLOURS[colour]
    # the screenshot of the page itself: the box's inside, as painted, is the call's colour
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    left, top, width, height = found["rect"]
    assert top + height < HEIGHT, "the verdict box is not in the first screen"
    image = Image.open(shot).convert("RGB")
    corner = image.getpixel((int(left + 4), int(top + 4)))  # inside the border, left of any text
    assert corner == COLOURS[colour], (corner, found["rect"])
    others = set(COLOURS.values()) - {COLOURS[colour]}
    box = image.crop((int(left), int(top), int(left + width), int(top + height)))
    painted = {c for _, c in box.getcolors(maxcolors=box.width * box.height)}
    assert COLOURS[colour] in painted and not others & painted  # no other call's colour in the box
