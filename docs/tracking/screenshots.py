"""How docs/tracking.md's screenshots were made: TensorBoard and MLflow's UI on the study's logs, in headless
Chromium through Playwright (not a dependency of the testbed: `pip install playwright`, Debian's chromium).

    tensorboard --logdir /tmp/study/tensorboard --port 6006 &
    mlflow ui --backend-store-uri sqlite:////tmp/study/mlflow.db --port 5055 &
    python docs/tracking/screenshots.py docs/tracking

Each page gets real seconds to fetch its data and draw (Chromium's --virtual-time-budget drew TensorBoard's cards
empty); MLflow's UI opens in its GenAI view, so the script switches it to "Model training" first.
"""
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

TENSORBOARD = "http://localhost:6006/?tagFilter=accuracy%24%7Cbytes_up_total&smoothing=0#timeseries"
MLFLOW = "http://localhost:5055/#/experiments/1"


def main(out: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(TENSORBOARD)
        page.wait_for_timeout(8000)
        page.screenshot(path=out / "tensorboard.png")
        page.set_viewport_size({"width": 1500, "height": 950})
        page.goto(MLFLOW)
        page.wait_for_timeout(5000)
        for text in ("Got it", "Model training"):   # a first visit's tip, then the training runs' view
            page.get_by_text(text, exact=True).first.click(timeout=3000)
            page.wait_for_timeout(1500)
        page.goto(f"{MLFLOW}/runs?compareRunsMode=CHART")
        page.wait_for_timeout(10000)
        page.screenshot(path=out / "mlflow_sweep.png")
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
