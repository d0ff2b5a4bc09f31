import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli():
    for p in (os.environ.get("VQ_CLI"), os.path.join(ROOT, "build", "veloxquant"),
              shutil.which("veloxquant")):
        if p and os.access(p, os.X_OK):
            return p
    return None


def _model():
    d = os.environ.get("VQ_MODELS") or os.path.expanduser("~/.cache/veloxquant/models")
    p = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
    return p if os.path.isfile(p) else None


@pytest.fixture(scope="session")
def cli():
    p = _cli()
    if not p:
        pytest.skip("the veloxquant CLI is not built (make)")
    return p


@pytest.fixture(scope="session")
def model_path():
    p = _model()
    if not p:
        pytest.skip("default model missing (scripts/fetch_models.sh smollm2)")
    return p
