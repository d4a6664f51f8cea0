"""The Hugging Face Space's entry point (app_file in README_HF_SPACE.md): `python app.py`.

Reads the environment, builds the app (finspace.web.server.build_app: REST routes
beside the Gradio UI) and serves it with uvicorn on 0.0.0.0:$PORT (7860).

    FINSPACE_MODEL       catalogue key to load at start (default: the catalogue's
                         default for this hardware: GPU model, or the offline demo on CPU)
    FINSPACE_CATALOG     models.yaml to use (default: the repo's)
    FINSPACE_DATA_DIR    where the load ledger lives (default ./data; /data on a Space
                         with persistent storage)
    FINSPACE_ADMIN_TOKEN if set (16 to 256 characters), switching models needs it (Bearer header / UI field);
                         on a Space (SPACE_ID set) without it switching is off, unless
                         FINSPACE_OPEN_SWITCHING=1
    HF_TOKEN             for gated Hub repos
    PORT                 default 7860 (FINSPACE_HOST: the address, default 0.0.0.0)

Every variable is read once, by finspace.settings.Settings.from_env; a bad value exits 2 naming the fix.

The `if __name__ == "__main__":` guard matters: vLLM starts its engine core as a
spawned process, which imports the main module again.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))  # a Space runs app.py without `pip install -e .`


def main() -> int:
    from finspace.errors import FinspaceError
    from finspace.web.server import run
    from finspace.settings import Settings

    try:
        settings = Settings.from_env(os.environ)
    except FinspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(settings)


if __name__ == "__main__":
    raise SystemExit(main())
