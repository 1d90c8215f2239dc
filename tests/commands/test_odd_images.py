"""``predict`` on a folder holding odd image files: each one that cannot be read (truncated,
0 bytes, not an image under an image's name) is named in one line, and every other image is
still classified (a special file or a header declaring more pixels than fit stays a refusal of
the whole command: ``tests/data/test_inputs.py``); 16-bit and CMYK images are read by
their real depth and colour model. Where no image at all can be read, the command is refused
in one line."""
from __future__ import annotations


import numpy as np
import pytest
from PIL import Image
from reliability_table import proves
from runs import run_main, snapshot


@pytest.fixture
def folder(real_data_dir, tmp_path):
    digits = np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:3]
    folder = tmp_path / "images"
    folder.mkdir()
    for i, digit in enumerate(digits):
        Image.fromarray(digit).save(folder / f"good{i}.png")
    Image.fromarray(digits[0].astype(np.uint16) * 257).save(folder / "deep16.png")  # 16-bit grey
    Image.fromarray(digits[1]).convert("CMYK").save(folder / "cmyk.jpg")
    (folder / "truncated.png").write_bytes((folder / "good0.png").read_bytes()[:60])
    (folder / "empty.png").write_bytes(b"")
    (folder / "text.png").write_text("not an image")
    return folder


BAD = ("truncated.png", "empty.png", "text.png")


@proves("refused input", "`predict` on a folder with truncated, empty and non-image image files names each "
                         "in one line and still classifies every other image (16-bit and CMYK ones included); with "
                         "no readable image it is refused in one line")
def test_odd_images_are_named_and_the_others_classified(calibrated, folder, capsys):
    before = snapshot(calibrated)
    code, out, err = run_main(["predict", calibrated, folder], capsys)
    assert code == 0, err
    classified = {line.split()[0].rsplit("/", 1)[-1] for line in out.splitlines() if str(folder) in line}
    assert classified == {"good0.png", "good1.png", "good2.png", "deep16.png", "cmyk.jpg"}
    named = [line for line in err if "not classified" in line]
    assert len(named) == len(BAD) and all(any(bad in line for line in named) for bad in BAD), err
    assert snapshot(calibrated) == before


def test_a_folder_with_no_readable_image_is_refused_in_one_line(calibrated, folder, capsys):
    for path in folder.iterdir():
        if path.name not in BAD:
            path.unlink()
    code, _, err = run_main(["predict", calibrated, folder], capsys)
    assert code == 1 and len(err) == 1 and "no image of" in err[0], err
