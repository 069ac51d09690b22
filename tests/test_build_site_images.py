"""tools/build_site.py's figures: the outputs' PNGs (stored at 2x) become lossless WebP with the
same pixels, and the pages' <img> tags point at them, load lazily and carry a readable name."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

PIL = pytest.importorskip("PIL.Image")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
build_site = pytest.importorskip("build_site")  # imports widget_state, site_landing from tools/


def _pixels(path: Path) -> np.ndarray:
    with PIL.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def test_webp_images_keep_every_pixel_and_replace_the_png(tmp_path):
    rng = np.random.default_rng(0)
    # A plot-like picture (flat colours, thin lines) and noise: WebP wins on the first only.
    flat = np.full((60, 80, 4), 255, np.uint8)
    flat[10:50, 20:22] = (31, 119, 180, 255)
    flat[30, :] = (255, 127, 14, 255)
    flat[40:45, 60:70, 3] = 90  # a translucent patch: alpha kept too
    noise = rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)
    PIL.fromarray(flat).save(tmp_path / "flat.png")
    PIL.fromarray(noise).save(tmp_path / "noise.png", compress_level=9)
    converted = build_site.webp_images(tmp_path)
    assert "flat.png" in converted and not (tmp_path / "flat.png").exists()
    assert np.array_equal(_pixels(tmp_path / "flat.webp"), flat)
    for name in {"noise.png"} - converted:  # kept as PNG where WebP was not smaller
        assert (tmp_path / name).exists()
    if "noise.png" in converted:
        assert np.array_equal(_pixels(tmp_path / "noise.webp")[..., :3], noise)


def test_output_images_point_at_webp_load_lazily_and_are_named():
    page = ('<p>x</p><img alt="_images/ab12.png" height="320" src="_images/ab12.png" width="550" />'
            '<img alt="_images/cd34.png" src="_images/cd34.png" />'
            '<img alt="Colab logo" src="_static/images/logo_colab.png">')
    out = build_site.output_images(page, {"ab12.png"})
    assert 'src="_images/ab12.webp"' in out and 'src="_images/cd34.png"' in out
    assert out.count('loading="lazy"') == 2 and out.count('decoding="async"') == 2
    assert 'alt="Figure 1: the output of the code cell above"' in out
    assert 'alt="Figure 2: the output of the code cell above"' in out
    assert '<img alt="Colab logo" src="_static/images/logo_colab.png">' in out  # not an output
    assert "_images/ab12.png" not in out
